#!/usr/bin/env python3
"""Writes (or --checks) files/wic/docent.wks from the board layout, board/layout/partitions.

The partition table of every docent board is written once, in board/layout/partitions (order,
GPT names and type GUIDs, sizes, file systems); the simulated board is made from it, and the
Yocto image must have the very same table. This script turns it into the wic kickstart the
image uses (one file for every MACHINE: partitions are found by GPT name, never by device).
What fills each partition is decided here, by its name:

  boot       the boot files of IMAGE_BOOT_FILES (Pi firmware, U-Boot, boot.scr; boot.scr alone
             on qemuarm64), marked legacy-bootable (wic --active) for U-Boot's distro boot
  bootstate  raw: the initial boot state (docent-bootstate.bin, deployed by docent-boot-files)
  rootA      the image's root file system, mounted at / (read-only)
  rootB      the same root file system, unmounted (the other slot of a factory image)
  data       an empty ext4 file system, mounted at /data (fstab by label, checked at boot)

A name this script does not know fails: a new partition needs a decision here first.

  python3 yocto/meta-docent/scripts/generate-wks.py [PROJECT_ROOT] [--check]

--check writes nothing and exits 1, with a diff, when the committed file differs.
"""

import difflib
import sys
from pathlib import Path

LAYER = Path(__file__).resolve().parent.parent
WKS = LAYER / "files" / "wic" / "docent.wks"

HEADER = """\
# Generated from board/layout/partitions by scripts/generate-wks.py: do not edit; regenerate
#   python3 yocto/meta-docent/scripts/generate-wks.py .
# The docent board layout (GPT): boot, boot state, root A, root B, data. Every partition is
# found by its GPT name (PARTLABEL): the boot script, root=, /etc/fstab and /etc/fw_env.config
# never name a device, so this one file serves every MACHINE (mmcblk0 on a Pi 4, vda under
# QEMU). Sizes are fixed (--fixed-size): a root file system that outgrows its slot fails the
# build instead of shifting the table.
"""

ALIGN_KIB = 4096


def parse(text):
    """The rows of board/layout/partitions: (number, name, guid, mib, fs)."""
    rows = []
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split(None, 5)
        if len(fields) < 5:
            sys.exit(f"board/layout/partitions:{lineno}: expected number name guid MiB fs what")
        number, name, guid, mib, fs = fields[:5]
        if not number.isdigit() or not mib.isdigit():
            sys.exit(f"board/layout/partitions:{lineno}: number and MiB must be integers")
        rows.append((int(number), name, guid.upper(), int(mib), fs))
    numbers = [r[0] for r in rows]
    if numbers != list(range(1, len(rows) + 1)):
        sys.exit(f"board/layout/partitions: partitions must be numbered 1..N in order, got {numbers}")
    return rows


def line_for(name, guid, mib, fs):
    common = (f"--part-name {name} --part-type {guid} --align {ALIGN_KIB} "
              f"--fixed-size {mib}M")
    want_fs = {"boot": "vfat", "bootstate": "raw", "rootA": "ext4", "rootB": "ext4",
               "data": "ext4"}
    if name not in want_fs:
        sys.exit(f"generate-wks.py: partition '{name}' is new: decide in this script what fills it")
    if fs != want_fs[name]:
        sys.exit(f"generate-wks.py: partition '{name}' is {fs}, this script fills it as {want_fs[name]}")
    if name == "boot":
        return f"part --source bootimg_partition --fstype=vfat --label boot --active {common}"
    if name == "bootstate":
        return (f'part --source rawcopy --sourceparams="file=docent-bootstate.bin" {common}')
    if name == "rootA":
        return f"part / --source rootfs --fstype=ext4 --label rootA {common}"
    if name == "rootB":
        return f"part --source rootfs --fstype=ext4 --label rootB {common}"
    return (f'part /data --fstype=ext4 --label data --use-label --fspassno=2 '
            f'--fsoptions "rw,noatime,nosuid,nodev,commit=5" {common}')


def render(rows):
    out = [HEADER]
    for _, name, guid, mib, fs in rows:
        out.append(line_for(name, guid, mib, fs) + "\n")
    out.append("\nbootloader --ptable gpt\n")
    return "".join(out)


def main(argv):
    args = [a for a in argv if a != "--check"]
    check = "--check" in argv
    root = Path(args[0]) if args else LAYER.parent.parent
    src = root / "board" / "layout" / "partitions"
    if not src.is_file():
        sys.exit(f"generate-wks.py: {src} is missing (the board layout)")
    want = render(parse(src.read_text(encoding="utf-8")))
    if not check:
        WKS.parent.mkdir(parents=True, exist_ok=True)
        WKS.write_text(want, encoding="utf-8")
        return 0
    have = WKS.read_text(encoding="utf-8") if WKS.is_file() else ""
    if have == want:
        return 0
    sys.stdout.writelines(difflib.unified_diff(
        have.splitlines(True), want.splitlines(True), str(WKS), "generated"))
    print(f"{WKS} is stale: regenerate it with python3 {Path(__file__)} {root}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
