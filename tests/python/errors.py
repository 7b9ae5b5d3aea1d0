"""What a user reads when a checkpoint goes wrong, through the Python
binding in one process (no coordinator: a Checkpoint of rank 0 of 1).

    errors.py new URI RUN        Checkpoint(URI, RUN): prints "opened", or
                                 "error NAME: MESSAGE" when it raises
    errors.py save URI RUN STEP  save STEP and wait: "committed STEP", or
                                 "error NAME: MESSAGE"
    errors.py load URI RUN       load twice: "fresh" or "loaded STEP" each
    errors.py inspect URI RUN    inspect: "fresh" or "found STEP"
"""
import sys

import numpy

import dptrain


def main(mode, uri, run, *args):
    try:
        ck = dptrain.Checkpoint(uri=uri, run=run)
    except dptrain.DptrainError as e:
        print("error %s: %s" % (e.name, e))
        return 0
    if mode == "new":
        print("opened")
        return 0
    state = numpy.arange(1000, dtype=numpy.float32)
    ck.register("w", state)
    if mode == "save":
        try:
            ck.save(int(args[0]))
            ck.wait()
            print("committed %s" % args[0])
        except dptrain.DptrainError as e:
            print("error %s: %s" % (e.name, e))
    elif mode == "load":
        for _ in range(2):
            info = ck.load()
            print("fresh" if info is None else "loaded %d" % info.step)
    elif mode == "inspect":
        c = ck.inspect()
        print("fresh" if c is None else "found %d" % c.step)
    sys.stdout.flush()
    ck.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
