# coordinator: nothing built here yet
