# nooelint: oelint.var.bbclassextend - target-only firmware: no native/nativesdk variant makes sense
SUMMARY = "docent: firmware of a talking-character kiosk"
DESCRIPTION = "Conversation server, engine and device loop (push-to-talk button, microphone, \
               speaker, display) of a talking-character kiosk, in one Rust binary."
# PLACEHOLDER, like SRC_URI below: the project's public address once it has one.
# homepageping fetches HOMEPAGE over the network: CI lints offline, so it stays off here.
# nooelint: oelint.vars.homepageping
HOMEPAGE = "https://example.invalid/docent"
BUGTRACKER = "https://example.invalid/docent/issues"
SECTION = "multimedia"
CVE_PRODUCT = "docent"
# The project has no separate licence file; its licence is the `license` line of Cargo.toml.
LICENSE = "MIT | Apache-2.0"
LIC_FILES_CHKSUM = "file://Cargo.toml;beginline=6;endline=6;md5=86b31c7756a1a7962f28b62856ed4f05"

# alsa-sys finds the target's alsa-lib through pkg-config (inherit pkgconfig: the cross
# pkg-config and its sysroot settings): the binary is built by cargo here,
# against the image's own (shared) libasound, not the static cross build of board/cross-aarch64.sh.
# OpenH264 is built from the source bundled in the openh264-sys2 crate (C/C++ through the cc
# crate with the target toolchain); nasm is only used for its x86 assembly.
DEPENDS += "alsa-lib"
DEPENDS:append:x86 = " nasm-native"
DEPENDS:append:x86-64 = " nasm-native"

# The project's repository (docent-source.inc: a PLACEHOLDER address and commit). Its board/
# files are installed from the fetched tree (${S}/board), not from copies in this layer.
require docent-source.inc
SRC_URI = "${DOCENT_GIT_URI}"
SRCREV = "${DOCENT_SRCREV}"

# The board files: the units, scripts and rules of every board (board/systemd, board/udev,
# board/rauc, board/firstboot.sh, board/grow-data.sh) and the reference board's profile
# (board/raspberrypi4-64: docent.toml, asound.conf, the technician's console), which the
# qemuarm64 image carries too (the same image for QEMU). board/README.md says what each is.
DOCENT_BOARD = "${S}/board"
DOCENT_PROFILE = "${DOCENT_BOARD}/raspberrypi4-64"

require docent-crates.inc

inherit cargo cargo-update-recipe-crates pkgconfig systemd useradd

# The build script compiles proto/ with protox (pure Rust): no protoc needed.
# Cargo.toml asks for Rust >= 1.90 (edition 2024): wrynose's rust recipe must satisfy it.

# docent.service is Type=notify with WatchdogSec=10 (docent sends READY=1 and WATCHDOG=1);
# docent-firstboot.service writes the administrator password to /data before it starts.
# Both are enabled (multi-user.target) by the systemd class.
SYSTEMD_PACKAGES = "${PN}"
# docent-reboot.path reboots the board when docent creates /run/docent/reboot (docent holds no
# capability; docent-reboot.service, which it starts, is not enabled itself).
# docent-update-gate.service rolls back an update docent did not take within its deadline
# (update-gate.sh: outcome.json, `rauc status mark-bad booted`, reboot).
# docent-grow-data.service grows the data partition (the last one, board/layout/partitions) and
# its ext4 to the end of the card, at every boot until it reaches it (grow-data.sh).
# data-rauc.mount binds RAUC's state (/data/rauc) onto itself, so docent, which owns /data,
# cannot rename it aside (docs/security.md).
SYSTEMD_SERVICE:${PN} = "docent.service docent-firstboot.service docent-reboot.path \
                         docent-update-gate.service docent-grow-data.service data-rauc.mount"
SYSTEMD_AUTO_ENABLE:${PN} = "enable"

# docent.service runs as User=docent with SupplementaryGroups=audio video input gpio: the user
# and the groups must exist or the unit fails (217/USER, 216/GROUP). audio, video and input come
# with base-passwd; gpio and docent's own group are made here. No home, no login shell.
USERADD_PACKAGES = "${PN}"
GROUPADD_PARAM:${PN} = "--system gpio; --system docent"
USERADD_PARAM:${PN} = "--system --gid docent --groups audio,video,input,gpio \
                       --home-dir /nonexistent --no-create-home \
                       --shell ${base_sbindir}/nologin docent"

do_install:append() {
    # cargo_do_install has put the binary in ${bindir}/docent.
    install -d ${D}${sysconfdir}/docent
    install -m 0644 ${DOCENT_PROFILE}/docent.toml ${D}${sysconfdir}/docent/docent.toml
    install -m 0644 ${DOCENT_PROFILE}/asound.conf ${D}${sysconfdir}/asound.conf

    install -d ${D}${systemd_system_unitdir}
    install -m 0644 ${DOCENT_BOARD}/systemd/docent.service ${D}${systemd_system_unitdir}/docent.service
    install -m 0644 ${DOCENT_BOARD}/systemd/docent-firstboot.service ${D}${systemd_system_unitdir}/docent-firstboot.service
    install -m 0644 ${DOCENT_BOARD}/systemd/docent-reboot.path ${D}${systemd_system_unitdir}/docent-reboot.path
    install -m 0644 ${DOCENT_BOARD}/systemd/docent-reboot.service ${D}${systemd_system_unitdir}/docent-reboot.service
    install -m 0644 ${DOCENT_BOARD}/systemd/docent-update-gate.service ${D}${systemd_system_unitdir}/docent-update-gate.service
    install -m 0644 ${DOCENT_BOARD}/systemd/docent-grow-data.service ${D}${systemd_system_unitdir}/docent-grow-data.service
    install -m 0644 ${DOCENT_BOARD}/systemd/data-rauc.mount ${D}${systemd_system_unitdir}/data-rauc.mount

    install -d ${D}${libexecdir}/docent
    install -m 0755 ${DOCENT_BOARD}/firstboot.sh ${D}${libexecdir}/docent/firstboot.sh
    install -m 0755 ${DOCENT_BOARD}/rauc/update-gate.sh ${D}${libexecdir}/docent/update-gate.sh
    install -m 0755 ${DOCENT_BOARD}/grow-data.sh ${D}${libexecdir}/docent/grow-data.sh

    # The technician's console (docent-console): a drop-in for every serial-getty@ instance
    # (systemd's unit, which SERIAL_CONSOLES enables through systemd-serialgetty) and the shell
    # it starts.
    install -d ${D}${systemd_system_unitdir}/serial-getty@.service.d
    install -m 0644 ${DOCENT_PROFILE}/serial-getty.conf ${D}${systemd_system_unitdir}/serial-getty@.service.d/docent.conf
    install -m 0755 ${DOCENT_PROFILE}/console-shell ${D}${libexecdir}/docent/console-shell

    # The device nodes go to docent's groups; the data partition to docent (at every boot).
    install -d ${D}${nonarch_base_libdir}/udev/rules.d
    install -m 0644 ${DOCENT_BOARD}/udev/70-docent.rules ${D}${nonarch_base_libdir}/udev/rules.d/70-docent.rules
    install -d ${D}${nonarch_libdir}/tmpfiles.d
    install -m 0644 ${DOCENT_BOARD}/systemd/docent-tmpfiles.conf ${D}${nonarch_libdir}/tmpfiles.d/docent.conf

    # Mount point of the data partition (the root file system is read-only).
    install -d -m 0700 ${D}/data
    chown docent:docent ${D}/data
}

# /etc/asound.conf for the reference board in its own package (alsa-state also ships one).
# docent-console: the technician's root shell on the serial console (board/raspberrypi4-64/serial-getty.conf,
# which says why there is no password: the line is reached only inside the kiosk's case, where
# the card is too). Its own package, so an image can leave it out. The drop-in runs
# /usr/bin/busybox getty (-n -l console-shell): busybox is the image's base utilities
# (packagegroup-core-boot), built with getty (oe-core's login-utilities.cfg), in ${base_bindir},
# /usr/bin with systemd (usrmerge); root's home is /root (init-manager-systemd.inc), where
# console-shell starts the shell. bitbake-values.py checks all four.
PACKAGES =+ "${PN}-asound-conf ${PN}-console"

FILES:${PN}-asound-conf += "${sysconfdir}/asound.conf"
FILES:${PN}-console += "${systemd_system_unitdir}/serial-getty@.service.d/docent.conf \
                        ${libexecdir}/docent/console-shell \
                        "
FILES:${PN} += "${systemd_system_unitdir}/docent.service \
                ${systemd_system_unitdir}/docent-firstboot.service \
                ${systemd_system_unitdir}/docent-reboot.path \
                ${systemd_system_unitdir}/docent-reboot.service \
                ${systemd_system_unitdir}/docent-update-gate.service \
                ${systemd_system_unitdir}/docent-grow-data.service \
                ${systemd_system_unitdir}/data-rauc.mount \
                ${libexecdir}/docent/firstboot.sh \
                ${libexecdir}/docent/update-gate.sh \
                ${libexecdir}/docent/grow-data.sh \
                ${sysconfdir}/docent/docent.toml \
                ${nonarch_base_libdir}/udev/rules.d/70-docent.rules \
                ${nonarch_libdir}/tmpfiles.d/docent.conf \
                /data \
                "

CONFFILES:${PN} = "${sysconfdir}/docent/docent.toml"
CONFFILES:${PN}-asound-conf = "${sysconfdir}/asound.conf"

# The offline engine runs these programs: espeak-ng (speech) and pocketsphinx_continuous with
# the en-us model in /usr/share/pocketsphinx/model/en-us (recognition), this layer's recipes of
# the versions Debian 12 ships (which the engine's tests run). alsa-lib is picked up from the
# binary's shared-library dependencies; it is named here for clarity. rauc: update-gate.sh marks
# a slot bad with it (docent itself calls RAUC's service, in the image with rauc-conf).
# grow-data.sh: sfdisk and partx (util-linux makes a package of each program: util-linux-sfdisk,
# util-linux-partx), resize2fs and dumpe2fs (e2fsprogs' own packages), and readlink -f, sed, cat
# and basename (busybox, the image's base utilities; its readlink has -f).
# firstboot.sh and update-gate.sh run as root but write to the data partition only as docent,
# through setpriv (util-linux-setpriv: oe-core builds it for every target; runuser would need
# PAM), with busybox's id.
RDEPENDS:${PN} = "alsa-lib busybox e2fsprogs-dumpe2fs e2fsprogs-resize2fs espeak-ng pocketsphinx \
                  pocketsphinx-en-us rauc util-linux-partx util-linux-setpriv util-linux-sfdisk"
# The console's drop-in runs /usr/bin/busybox getty.
RDEPENDS:${PN}-console = "busybox"

RCONFLICTS:${PN}-asound-conf = "alsa-state"
