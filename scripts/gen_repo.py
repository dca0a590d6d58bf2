#!/usr/bin/env python3
"""A generated monorepo for the fetch benchmark (scripts/bench fetch).

Usage: gen_repo.py DIR FILES COMMITS [KB]

Makes a bare repository at DIR whose `main` has COMMITS commits adding
FILES files in all (about KB kilobytes each, 4 by default, of hex text: it packs to about half
its size, as source code does), with a CloudFormation template at
stacks/app/template.yaml changed by the last commit. Written through
`git fast-import`, so 30,000 files take seconds.
"""
import os
import random
import subprocess
import sys

TEMPLATE = b"Resources:\n  Queue: {Type: AWS::SQS::Queue}\n"


def blob(data):
    return b"data %d\n%s\n" % (len(data), data)


def main():
    target, files, commits = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    kb = int(sys.argv[4]) if len(sys.argv) > 4 else 4
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", target], check=True)
    rng = random.Random(42)
    stream = []
    per_commit = max(1, files // commits)
    n = 0
    for c in range(commits):
        stream.append(b"commit refs/heads/main\n")
        stream.append(b"committer bench <bench@stacksync.invalid> %d +0000\n" % (1_700_000_000 + c))
        stream.append(blob(b"commit %d" % c))
        if c == 0:
            stream.append(b"M 100644 inline stacks/app/template.yaml\n" + blob(TEMPLATE))
        if c == commits - 1:
            stream.append(b"M 100644 inline stacks/app/template.yaml\n" + blob(TEMPLATE + b"# v2\n"))
        for _ in range(per_commit):
            content = ("%x" % rng.getrandbits(1000 * kb * 4)).encode()
            path = "src/mod%03d/dir%02d/file%05d.txt" % (n % 300, n % 17, n)
            stream.append(b"M 100644 inline " + path.encode() + b"\n" + blob(content))
            n += 1
        stream.append(b"\n")
    subprocess.run(["git", "fast-import", "--quiet"], input=b"".join(stream), cwd=target, check=True)
    subprocess.run(["git", "gc", "-q", "--prune=now"], cwd=target, check=True)


if __name__ == "__main__":
    main()
