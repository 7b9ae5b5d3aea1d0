# bench: nothing built here yet
