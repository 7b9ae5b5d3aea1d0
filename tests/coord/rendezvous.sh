echo "1..0 # SKIP not yet"; exit 77
