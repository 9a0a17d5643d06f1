"""Progress-bar output as tqdm writes it (carriage returns), with steps the test controls.

Usage: bars.py OUT [free]. Rank 0 draws 'bar 1/3' on stderr, then 'bar 2/3' once OUT/go1 exists,
then 'bar 3/3' and a newline once OUT/go2 exists. Rank 1 waits for OUT/go1, draws 'other 1/2' on
stderr, prints 'rank 1 says hi' on stdout and ends once OUT/go2 exists. With 'free' nobody waits.
"""

import os
import sys
import time
from pathlib import Path

out, free = Path(sys.argv[1]), sys.argv[2:] == ["free"]
rank = os.environ["RANK"]


def wait(name):
    while not free and not (out / name).exists():
        time.sleep(0.02)


def draw(text, end=""):
    sys.stderr.write(f"\r{text}{end}")
    sys.stderr.flush()


if rank == "0":
    draw("bar 1/3")
    wait("go1")
    draw("bar 2/3")
    wait("go2")
    draw("bar 3/3", "\n")
else:
    wait("go1")
    draw("other 1/2")
    print("rank 1 says hi", flush=True)
    wait("go2")
