# integration tests on the Slurm test bed (see tests/cluster/)
