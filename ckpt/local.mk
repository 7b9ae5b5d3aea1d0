# ckpt: nothing built here yet
