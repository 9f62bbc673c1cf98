#!/usr/bin/env python3
"""Checks that the layer's update settings match the board files they follow (exit 1 if not):
  - docent-bundle.bb's RAUC_BUNDLE_COMPATIBLE:<MACHINE> for each machine is the `compatible`
    of that board's system.conf (board/<MACHINE>/rauc-system.conf: a board's folder is named by
    its MACHINE): RAUC refuses a bundle whose compatible differs, so a mismatch would make every
    update of that board fail;
  - docent-image.bb's IMAGE_ROOTFS_SIZE and IMAGE_ROOTFS_MAXSIZE (KiB) are the size of the root
    slots rootA and rootB in board/layout/partitions: the ext4 image a bundle carries is written
    into a slot.
  check-update-config.py PROJECT_ROOT [LAYER]     (LAYER: default PROJECT_ROOT/yocto/meta-docent)
"""
import re
import sys
from pathlib import Path



def assignments(path):
    """NAME = "value" lines of a recipe (overrides kept in NAME), as a dict."""
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        m = re.match(r'^([A-Za-z0-9_:.-]+)\s*=\s*"([^"]*)"\s*$', line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def main():
    root = Path(sys.argv[1])
    layer = Path(sys.argv[2]) if len(sys.argv) > 2 else root / "yocto" / "meta-docent"
    errors = []
    bundle = layer / "recipes-core" / "bundles" / "docent-bundle.bb"
    bundle_vars = assignments(bundle)
    machines = [k.split(":", 1)[1] for k in bundle_vars if k.startswith("RAUC_BUNDLE_COMPATIBLE:")]
    if not machines:
        errors.append(f"{bundle}: no RAUC_BUNDLE_COMPATIBLE:<MACHINE>")
    for machine in machines:
        conf = root / "board" / machine / "rauc-system.conf"
        if not conf.is_file():
            errors.append(f"{bundle}: RAUC_BUNDLE_COMPATIBLE:{machine}, but there is no {conf}")
            continue
        found = re.findall(r"^compatible=(.*)$", conf.read_text(encoding="utf-8"), re.M)
        if len(found) != 1:
            errors.append(f"{conf}: expected one compatible= line, found {len(found)}")
            continue
        got = bundle_vars.get(f"RAUC_BUNDLE_COMPATIBLE:{machine}")
        if got != found[0]:
            errors.append(f"{bundle}: RAUC_BUNDLE_COMPATIBLE:{machine} is {got!r}, "
                          f"but {conf} says compatible={found[0]}")
    sizes = {}
    for line in (root / "board" / "layout" / "partitions").read_text(encoding="utf-8").splitlines():
        fields = line.split()
        if len(fields) >= 4 and not line.startswith("#") and fields[1] in ("rootA", "rootB"):
            sizes[fields[1]] = int(fields[3]) * 1024
    if len(set(sizes.values())) != 1 or len(sizes) != 2:
        errors.append(f"board/layout/partitions: rootA and rootB must have one size, found {sizes}")
    else:
        kib = str(next(iter(sizes.values())))
        image = layer / "recipes-core" / "images" / "docent-image.bb"
        image_vars = assignments(image)
        for var in ("IMAGE_ROOTFS_SIZE", "IMAGE_ROOTFS_MAXSIZE"):
            if image_vars.get(var) != kib:
                errors.append(f"{image}: {var} is {image_vars.get(var)!r}, but a root slot in "
                              f"board/layout/partitions is {kib} KiB")
    for e in errors:
        print(f"check-update-config: {e}", file=sys.stderr)
    if errors:
        return 1
    compatibles = ", ".join(m + "=" + bundle_vars["RAUC_BUNDLE_COMPATIBLE:" + m] for m in machines)
    print(f"check-update-config: bundle compatibles and the slot size match board/ "
          f"({compatibles}; {kib} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
