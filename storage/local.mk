# storage: nothing built here yet
