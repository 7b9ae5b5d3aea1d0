# contrib: nothing built here yet
