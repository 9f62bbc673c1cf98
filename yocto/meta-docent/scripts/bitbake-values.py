#!/usr/bin/env python3
"""What bitbake makes of the update settings, per machine (run by bitbake-check.sh, in its build
directory, after `bitbake -g`, with bitbake's lib/ on PYTHONPATH; one tinfoil session, parse
cache warm). Exit 1 with the reasons when any of these does not hold, for qemuarm64 and (mc:pi:)
raspberrypi4-64:
  - the kernel (virtual/kernel: linux-yocto, linux-raspberrypi) fetches meta-rauc's rauc.cfg,
    and that fragment asks for loop, squashfs, device mapper and dm-verity built in;
  - rauc-conf's system.conf is the machine's copy of its board's (files/<MACHINE>/system.conf)
    and its compatible is docent-bundle's RAUC_BUNDLE_COMPATIBLE;
  - docent-bundle: verity, the rootfs slot from docent-image's ext4, version DISTRO_VERSION,
    which is also os-release's VERSION_ID;
  - rauc is built without network and streaming, and the image refuses rauc-mark-good.
"""
import os
import re
import sys

import bb.fetch2
import bb.tinfoil

MACHINES = {"": "qemuarm64", "mc:pi:": "raspberrypi4-64"}
FRAGMENT = ("CONFIG_BLK_DEV_LOOP=y", "CONFIG_SQUASHFS=y", "CONFIG_BLK_DEV_DM=y",
            "CONFIG_DM_VERITY=y")


def local_path(d, name):
    """Where the fetcher finds file://NAME of a recipe (its FILESPATH, overrides applied)."""
    fetcher = bb.fetch2.Fetch([u for u in d.getVar("SRC_URI").split()
                               if u.split(";")[0] == "file://" + name], d)
    return [fetcher.localpath(u) for u in fetcher.urls]


def check(tinfoil, mc, machine, errors):
    def err(msg):
        errors.append(f"{machine}: {msg}")

    def recipe(pn):
        return tinfoil.parse_recipe(mc + pn)

    kernel = recipe("virtual/kernel")
    frags = local_path(kernel, "rauc.cfg")
    if len(frags) != 1 or not os.path.exists(frags[0]):
        err(f"{kernel.getVar('PN')} does not fetch rauc.cfg (SRC_URI: {kernel.getVar('SRC_URI')})")
    else:
        text = open(frags[0], encoding="utf-8").read().split()
        missing = [f for f in FRAGMENT if f not in text]
        if missing:
            err(f"{frags[0]} lacks {', '.join(missing)}")

    conf = recipe("rauc-conf")
    paths = local_path(conf, "system.conf")
    want = f"/recipes-core/rauc/files/{machine}/system.conf"
    if len(paths) != 1 or not paths[0].endswith(want):
        err(f"rauc-conf's system.conf is {paths}, not the layer's ...{want}")
        compatible = None
    else:
        found = re.findall(r"^compatible=(.*)$", open(paths[0], encoding="utf-8").read(), re.M)
        compatible = found[0] if len(found) == 1 else None

    bundle = recipe("docent-bundle")
    if bundle.getVar("RAUC_BUNDLE_COMPATIBLE") != compatible:
        err(f"docent-bundle's RAUC_BUNDLE_COMPATIBLE is {bundle.getVar('RAUC_BUNDLE_COMPATIBLE')!r}, "
            f"rauc-conf's system.conf says {compatible!r}")
    for var, want in (("RAUC_BUNDLE_FORMAT", "verity"), ("RAUC_BUNDLE_SLOTS", "rootfs"),
                      ("RAUC_SLOT_rootfs", "docent-image")):
        if bundle.getVar(var) != want:
            err(f"docent-bundle's {var} is {bundle.getVar(var)!r}, not {want!r}")
    if bundle.getVarFlag("RAUC_SLOT_rootfs", "fstype") != "ext4":
        err("docent-bundle's rootfs slot is not the ext4 image")
    version = bundle.getVar("DISTRO_VERSION")
    if bundle.getVar("RAUC_BUNDLE_VERSION") != version:
        err(f"docent-bundle's version {bundle.getVar('RAUC_BUNDLE_VERSION')!r} is not "
            f"DISTRO_VERSION {version!r}")
    if recipe("os-release").getVar("VERSION_ID") != version:
        err(f"os-release's VERSION_ID is not DISTRO_VERSION {version!r}")

    image = recipe("docent-image")
    if "ext4" not in image.getVar("IMAGE_FSTYPES").split():
        err("docent-image makes no ext4 image (the bundle's slot image)")
    if "rauc-mark-good" not in image.getVar("BAD_RECOMMENDATIONS").split():
        err("docent-image would install rauc-mark-good (marks every slot good at boot)")
    for pkg in ("rauc", "rauc-service", "rauc-conf"):
        if pkg not in image.getVar("IMAGE_INSTALL").split():
            err(f"docent-image does not install {pkg}")

    pkgconfig = recipe("rauc").getVar("PACKAGECONFIG").split()
    for unwanted in ("network", "streaming"):
        if unwanted in pkgconfig:
            err(f"rauc is built with {unwanted} (PACKAGECONFIG {pkgconfig})")
    if "service" not in pkgconfig:
        err(f"rauc is built without its D-Bus service (PACKAGECONFIG {pkgconfig})")
    return f"{machine}: kernel {kernel.getVar('PN')} with rauc.cfg, compatible {compatible}, " \
           f"version {version}"


def main():
    errors = []
    done = []
    with bb.tinfoil.Tinfoil() as tinfoil:
        tinfoil.prepare(quiet=2)
        for mc, machine in MACHINES.items():
            done.append(check(tinfoil, mc, machine, errors))
    for e in errors:
        print(f"bitbake-values: {e}", file=sys.stderr)
    if errors:
        return 1
    for line in done:
        print(f"bitbake-values: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
