#!/usr/bin/env python3
"""What bitbake makes of the update settings, per machine (run by bitbake-check.sh, in its build
directory, after `bitbake -g`, with bitbake's lib/ on PYTHONPATH; one tinfoil session, parse
cache warm). Exit 1 with the reasons when any of these does not hold, for qemuarm64 and (mc:pi:)
raspberrypi4-64:
  - docent, docent-boot and rauc-conf fetch the project (DOCENT_GIT_URI, docent-source.inc) and
    their DOCENT_BOARD is its board/ folder where the fetcher unpacks it; every board/ file their
    do_compile and do_install name exists in the project (PROJECT, the argument: the files are
    not fetched here, so bitbake itself cannot tell);
  - the kernel (virtual/kernel: linux-yocto, linux-raspberrypi) fetches meta-rauc's rauc.cfg,
    and that fragment asks for loop, squashfs, device mapper and dm-verity built in;
  - rauc-conf installs board/<MACHINE>/rauc-system.conf as /etc/rauc/system.conf, and its
    compatible is docent-bundle's RAUC_BUNDLE_COMPATIBLE;
  - docent-bundle: verity, the rootfs slot from docent-image's ext4, version DISTRO_VERSION,
    which is also os-release's VERSION_ID;
  - os-release writes DOCENT_MIN_VERSION (the firmware's minimum version, which docent reads
    from the running image), and its value is digits, letters and . + ~ - or empty;
  - rauc is built without network and streaming, and the image refuses rauc-mark-good;
  - the Pi's kernel (linux-raspberrypi) also fetches the layer's docent-boot.cfg, which builds in
    what lies between it and its root (SD controllers, their regulators, the watchdog, ext4),
    and no other local fragment of that kernel sets one of those options otherwise;
  - the technician's console: the image installs docent-console, whose drop-in for
    serial-getty@ (a board/ file) runs busybox getty from where busybox is
    (${base_bindir}/busybox, built with getty) and console-shell from where the recipe puts it,
    and root's home is /root;
  - docent enables docent-grow-data.service and depends on the packages of the programs
    grow-data.sh runs (sfdisk, partx, resize2fs, dumpe2fs, readlink).
  bitbake-values.py PROJECT
"""
import os
import re
import sys
from pathlib import Path

import bb.fetch2
import bb.tinfoil

MACHINES = {"": "qemuarm64", "mc:pi:": "raspberrypi4-64"}
FRAGMENT = ("CONFIG_BLK_DEV_LOOP=y", "CONFIG_SQUASHFS=y", "CONFIG_BLK_DEV_DM=y",
            "CONFIG_DM_VERITY=y")
# The layer's fragment for the Pi's kernel (dynamic-layers/raspberrypi/recipes-kernel/linux/files/):
# the image has no initramfs, so these must be built in.
BOOT_FRAGMENT = ("CONFIG_MMC_SDHCI_IPROC=y", "CONFIG_MMC_BCM2835=y",
                 "CONFIG_REGULATOR_FIXED_VOLTAGE=y", "CONFIG_REGULATOR_GPIO=y",
                 "CONFIG_GPIO_RASPBERRYPI_EXP=y", "CONFIG_BCM2835_WDT=y", "CONFIG_EXT4_FS=y")
BOOT_FRAGMENT_MACHINES = ("raspberrypi4-64",)
# What grow-data.sh runs, by package: sfdisk, partx, resize2fs, dumpe2fs; readlink -f (busybox).
GROW_DATA_RDEPENDS = ("util-linux-sfdisk", "util-linux-partx", "e2fsprogs-resize2fs",
                      "e2fsprogs-dumpe2fs", "busybox")


def local_path(d, name):
    """Where the fetcher finds file://NAME of a recipe (its FILESPATH, overrides applied); []
    when the recipe does not fetch it (an empty list would make Fetch take all of SRC_URI)."""
    urls = [u for u in d.getVar("SRC_URI").split() if u.split(";")[0] == "file://" + name]
    if not urls:
        return []
    fetcher = bb.fetch2.Fetch(urls, d)
    return [fetcher.localpath(u) for u in fetcher.urls]


def board_files(d, project, err):
    """The board/ files (paths relative to the project) a recipe's do_compile and do_install name
    through DOCENT_BOARD; DOCENT_BOARD must be the board/ folder of the project's tree where the
    recipe's fetcher unpacks it, and each file must exist in PROJECT."""
    pn = d.getVar("PN")
    want = d.getVar("DOCENT_GIT_URI")
    board = d.getVar("DOCENT_BOARD")
    urls = [u for u in d.getVar("SRC_URI").split() if want and u.split(";")[0] == want.split(";")[0]]
    if len(urls) != 1 or not board:
        err(f"{pn} does not fetch the project once ({want}) into a DOCENT_BOARD "
            f"(SRC_URI: {d.getVar('SRC_URI')}; DOCENT_BOARD: {board})")
        return []
    params = dict(p.split("=", 1) for p in urls[0].split(";")[1:] if "=" in p)
    tree = os.path.join(d.getVar("UNPACKDIR"),
                        params.get("destsuffix") or d.getVar("BB_GIT_DEFAULT_DESTSUFFIX"))
    if os.path.normpath(board) != os.path.join(tree, "board"):
        err(f"{pn}'s DOCENT_BOARD is {board}, not the board/ of the project it fetches ({tree})")
    files = []
    for func in ("do_compile", "do_install"):
        text = d.getVar(func) or ""
        for path in re.findall(re.escape(board) + r"/[^\s;(){}\"'<>$]+", text):
            rel = "board/" + path[len(board) + 1:]
            if rel not in files:
                files.append(rel)
            if not (project / rel).is_file():
                err(f"{pn} installs {rel}, which the project does not have ({project / rel})")
    if not files:
        err(f"{pn} names no board/ file through DOCENT_BOARD")
    return files


def installed_from(d, dest):
    """The source of `install ... SRC DEST` in a recipe's do_install (DEST expanded), or None."""
    dest = d.expand(dest)
    for line in (d.getVar("do_install") or "").splitlines():
        words = line.split()
        if len(words) >= 3 and words[0] == "install" and words[-1] == dest:
            return words[-2]
    return None


def project_file(d, src, project):
    """SRC, a path under a recipe's DOCENT_BOARD, as the project's file; None if it is not one."""
    board = d.getVar("DOCENT_BOARD")
    if not src or not board or not src.startswith(board + "/"):
        return None
    return project / "board" / src[len(board) + 1:]


def local_files(d, suffix):
    """The local files (file://...SUFFIX) a recipe fetches, where the fetcher finds them."""
    urls = [u for u in d.getVar("SRC_URI").split()
            if u.startswith("file://") and u.split(";")[0].endswith(suffix)]
    if not urls:
        return []
    fetcher = bb.fetch2.Fetch(urls, d)
    return [fetcher.localpath(u) for u in fetcher.urls]


def config_options(path):
    """CONFIG_X -> value ("y", "m", "n" for "# CONFIG_X is not set") of a kernel fragment."""
    options = {}
    for line in open(path, encoding="utf-8"):
        m = re.match(r"^(CONFIG_\w+)=(.*)$", line.strip()) \
            or re.match(r"^# (CONFIG_\w+) is not set$", line.strip())
        if m:
            options[m.group(1)] = m.group(2) if m.lastindex == 2 else "n"
    return options


def check_boot_fragment(kernel, err):
    """The Pi kernel's docent-boot.cfg: fetched from the layer, with BOOT_FRAGMENT, and no other
    local fragment of the kernel sets those options otherwise."""
    frags = local_path(kernel, "docent-boot.cfg")
    want = "/dynamic-layers/raspberrypi/recipes-kernel/linux/files/docent-boot.cfg"
    if len(frags) != 1 or not frags[0].endswith(want) or not os.path.exists(frags[0]):
        err(f"{kernel.getVar('PN')} does not fetch docent-boot.cfg (the layer's ...{want}; "
            f"SRC_URI: {kernel.getVar('SRC_URI')})")
        return
    ours = config_options(frags[0])
    missing = [f for f in BOOT_FRAGMENT if ours.get(f.split("=")[0]) != f.split("=")[1]]
    if missing:
        err(f"{frags[0]} lacks {', '.join(missing)}")
    for other in local_files(kernel, ".cfg"):
        if other == frags[0] or not os.path.exists(other):
            continue
        for name, value in config_options(other).items():
            if name in ours and value != ours[name]:
                err(f"{other} sets {name}={value}, docent-boot.cfg {ours[name]}")


def check_console(image, docent, busybox, project, err):
    """docent-console in the image, and what its drop-in runs where the recipes put it."""
    if "docent-console" not in image.getVar("IMAGE_INSTALL").split():
        err("docent-image does not install docent-console (the technician's console)")
    dropin = docent.expand("${systemd_system_unitdir}/serial-getty@.service.d/docent.conf")
    if dropin not in (docent.getVar("FILES:docent-console") or "").split():
        err(f"docent-console does not ship {dropin}")
    path = project_file(docent, installed_from(docent, "${D}" + dropin), project)
    if path is None or not path.is_file():
        err(f"docent does not install a board/ file as {dropin} (the console's drop-in): {path}")
        return None
    starts = [line.split("=", 1)[1].strip() for line in open(path, encoding="utf-8")
              if line.startswith("ExecStart=")]
    argv = starts[-1].lstrip("-").split() if starts and starts[-1] else []
    shell = docent.expand("${libexecdir}/docent/console-shell")
    want_busybox = busybox.expand("${base_bindir}/busybox")
    if argv[:2] != [want_busybox, "getty"]:
        err(f"the serial-getty drop-in runs {argv[:2]}, not {want_busybox} getty (busybox's path)")
    if "-l" not in argv or argv[argv.index("-l") + 1:][:1] != [shell]:
        err(f"the serial-getty drop-in does not start {shell} (-l): {argv}")
    if shell not in (docent.getVar("FILES:docent-console") or "").split():
        err(f"docent-console does not ship {shell}")
    getty = [f for f in local_files(busybox, ".cfg")
             if os.path.exists(f) and config_options(f).get("CONFIG_GETTY") == "y"]
    if not getty:
        err("busybox is built without getty (no fetched fragment sets CONFIG_GETTY=y)")
    base_utils = image.getVar("VIRTUAL-RUNTIME_base-utils")
    if "busybox" not in (docent.getVar("RDEPENDS:docent-console") or "").split() \
            and base_utils != "busybox":
        err(f"nothing installs busybox for the console (base utilities: {base_utils})")
    if image.getVar("ROOT_HOME") != "/root":
        err(f"root's home is {image.getVar('ROOT_HOME')}, console-shell starts its shell in /root")
    return want_busybox


def check_grow_data(docent, err):
    if "docent-grow-data.service" not in docent.getVar("SYSTEMD_SERVICE:docent").split():
        err("docent does not enable docent-grow-data.service (SYSTEMD_SERVICE)")
    rdepends = docent.getVar("RDEPENDS:docent").split()
    missing = [p for p in GROW_DATA_RDEPENDS if p not in rdepends]
    if missing:
        err(f"docent does not depend on {', '.join(missing)} (grow-data.sh runs them)")


def check(tinfoil, mc, machine, project, errors):
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
    if machine in BOOT_FRAGMENT_MACHINES:
        check_boot_fragment(kernel, err)

    conf = recipe("rauc-conf")
    docent = recipe("docent")
    boards = {pn: board_files(d, project, err)
              for pn, d in (("docent", docent), ("docent-boot", recipe("docent-boot")),
                            ("rauc-conf", conf))}
    path = project_file(conf, installed_from(conf, "${D}${sysconfdir}/rauc/system.conf"), project)
    want = project / "board" / machine / "rauc-system.conf"
    if path != want:
        err(f"rauc-conf's /etc/rauc/system.conf is {path}, not the project's {want}")
        compatible = None
    elif not want.is_file():
        compatible = None  # board_files said so
    else:
        found = re.findall(r"^compatible=(.*)$", want.read_text(encoding="utf-8"), re.M)
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
    release = recipe("os-release")
    if release.getVar("VERSION_ID") != version:
        err(f"os-release's VERSION_ID is not DISTRO_VERSION {version!r}")
    if "DOCENT_MIN_VERSION" not in release.getVar("OS_RELEASE_FIELDS").split():
        err(f"os-release does not write DOCENT_MIN_VERSION (OS_RELEASE_FIELDS: "
            f"{release.getVar('OS_RELEASE_FIELDS')})")
    floor = release.getVar("DOCENT_MIN_VERSION")
    if floor is None or not re.fullmatch(r"[0-9A-Za-z.+~-]*", floor):
        err(f"DOCENT_MIN_VERSION {floor!r}: digits, letters and . + ~ - only, or empty")

    image = recipe("docent-image")
    if "ext4" not in image.getVar("IMAGE_FSTYPES").split():
        err("docent-image makes no ext4 image (the bundle's slot image)")
    if "rauc-mark-good" not in image.getVar("BAD_RECOMMENDATIONS").split():
        err("docent-image would install rauc-mark-good (marks every slot good at boot)")
    for pkg in ("rauc", "rauc-service", "rauc-conf"):
        if pkg not in image.getVar("IMAGE_INSTALL").split():
            err(f"docent-image does not install {pkg}")

    busybox_path = check_console(image, docent, recipe("busybox"), project, err)
    check_grow_data(docent, err)

    pkgconfig = recipe("rauc").getVar("PACKAGECONFIG").split()
    for unwanted in ("network", "streaming"):
        if unwanted in pkgconfig:
            err(f"rauc is built with {unwanted} (PACKAGECONFIG {pkgconfig})")
    if "service" not in pkgconfig:
        err(f"rauc is built without its D-Bus service (PACKAGECONFIG {pkgconfig})")
    boot = " and docent-boot.cfg" if machine in BOOT_FRAGMENT_MACHINES else ""
    counts = ", ".join(f"{pn} {len(files)}" for pn, files in boards.items())
    return f"{machine}: board/ files from the project ({counts}), " \
           f"kernel {kernel.getVar('PN')} {kernel.getVar('LINUX_VERSION')} with rauc.cfg{boot}, " \
           f"compatible {compatible}, version {version}, minimum {floor or 'none'}, console {busybox_path} getty, " \
           f"grow-data enabled"


def main():
    project = Path(sys.argv[1]).resolve()
    errors = []
    done = []
    with bb.tinfoil.Tinfoil() as tinfoil:
        tinfoil.prepare(quiet=2)
        for mc, machine in MACHINES.items():
            done.append(check(tinfoil, mc, machine, project, errors))
    for e in errors:
        print(f"bitbake-values: {e}", file=sys.stderr)
    if errors:
        return 1
    for line in done:
        print(f"bitbake-values: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
