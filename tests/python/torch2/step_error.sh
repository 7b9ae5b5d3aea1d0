#!/bin/bash
# tests/python/step_error.sh on the torch 2 venv's Python (run.sh says how).
. "${top_srcdir:-$(dirname "$0")/../../..}/tests/python/torch2/run.sh"
