# doc: nothing built here yet
