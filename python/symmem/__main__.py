"""python3 -m symmem doctor: this rank's doctor report as JSON (run it under
`symmem launch -n N`; collective like init)."""

import json
import sys

import symmem


def main(argv):
    if argv[1:] != ["doctor"]:
        print("usage: python3 -m symmem doctor   (under `symmem launch -n N`)", file=sys.stderr)
        return 2
    w = symmem.init()
    print(json.dumps(w.doctor(), indent=1))
    w.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
