# rootfs.sh: the root file system of a docent board, one function for the disk image
# (mkdisk.sh: both slots) and the update bundle (bundle.sh: the slot's image). Sourced after
# lib.sh. root_setup checks the inputs and unpacks Debian's packages once; root_tree DIR builds
# the tree in DIR. Inputs (set by the caller):
#   NAME     the board, by its Yocto MACHINE (its folder under board/): qemuarm64 (the simulated
#            board, with its test rig) or raspberrypi4-64
#   BIN      the static aarch64 docent binary
#   VERSION  the image's version: VERSION_ID in /etc/os-release, the bundle's version
#   DOCENT_MIN_VERSION  optional: the oldest version docent installs over this image, forced or
#            not (docs/updates.md); empty: none
#   KEYRING  the CA certificate(s) a bundle must be signed under: /etc/rauc/keyring.pem
#   DOCENT_TOML  /etc/docent/docent.toml (default: the board's profile, board/<board>/docent.toml)
# What goes into the tree is described in mkdisk.sh's header. The inputs' defaults are set here
# (the simulated board, Cargo.toml's version, no binary, the test CA later); root_option sets
# one from the callers' options, which both share: --docent, --board, --version, --keyring.
A=arm64
# The Raspberry Pi 4's device tree (from Debian's kernel; the firmware hands it to U-Boot, U-Boot
# to the kernel), the node of its SD card's controller and that of its watchdog.
RPI4_DTB=bcm2711-rpi-4-b.dtb
RPI4_ROOT_NODE=/emmc2bus/mmc@7e340000
RPI4_RESET_NODE=/soc/watchdog@7e100000
BOARD=$(cd "$BOARD_SIM_DIR/.." && pwd)
BIN=""; NAME=qemuarm64; KEYRING=""; DOCENT_TOML=""
VERSION=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$BOARD/../Cargo.toml" | head -n1)

# root_option OPTION VALUE: sets the input OPTION names; returns 1 for any other option.
root_option() {
  case "$1" in
    --docent) BIN=$2 ;;
    --board) NAME=$2 ;;
    --version) VERSION=$2 ;;
    --keyring) KEYRING=$2 ;;
    *) return 1 ;;
  esac
}

root_setup() {
  case $NAME in qemuarm64|raspberrypi4-64) ;; *) die "--board qemuarm64|raspberrypi4-64 (got '$NAME')" ;; esac
  PROFILE=$BOARD/$NAME
  DOCENT_TOML=${DOCENT_TOML:-$PROFILE/docent.toml}
  [ -f "$DOCENT_TOML" ] || die "no docent.toml '$DOCENT_TOML'"
  GUEST=$BOARD_SIM_DIR/guest
  SIM=no; [ "$NAME" = qemuarm64 ] && SIM=yes
  KVER=$(kver_of $A); K=$SIM_HOME/kernel/$A
  GS=$SIM_HOME/gpio-sim/$A/gpio-sim.ko; [ $SIM = no ] || [ -f "$GS" ] || die "no $GS: run build-gpio-sim.sh $A"
  BB=$SIM_HOME/busybox/$A/bin/busybox; [ -x "$BB" ] || die "no busybox: run fetch-kernel.sh $A"
  [ -f "$BIN" ] || die "--docent BIN: no such file '$BIN'"
  [ -f "$KEYRING" ] || die "no keyring '$KEYRING'"
  case "$VERSION" in ""|*[!0-9A-Za-z.+~-]*) die "--version: digits, letters and . + ~ - only (got '$VERSION')" ;; esac
  case "${DOCENT_MIN_VERSION:-}" in *[!0-9A-Za-z.+~-]*) die "DOCENT_MIN_VERSION: digits, letters and . + ~ - only (got '$DOCENT_MIN_VERSION')" ;; esac

  # --- Debian's packages, unpacked once (the speech engine's with their own dependencies) ---
  # The root's packages and what they need at run time; maintainer-script-only dependencies
  # (debconf, perl, adduser, dpkg) are left out.
  ROOT_PKGS=(systemd udev dbus dbus-daemon dbus-bin libubootenv-tool libubootenv0.1 mount kmod
    libacl1 libapparmor1 libaudit1 libblkid1 libcap2 libcap-ng0 libcrypt1 libcryptsetup12 libfdisk1
    libgcrypt20 libgpg-error0 libip4tc2 libkmod2 liblz4-1 liblzma5 libmount1 libpam0g libseccomp2
    libselinux1 libssl3 libsystemd-shared libsystemd0 libzstd1 libpcre2-8-0 libargon2-1
    libdevmapper1.02.1 libjson-c5 libuuid1 libudev1 libsmartcols1 libc6 libgcc-s1 gcc-12-base
    libdbus-1-3 libexpat1 libp11-kit0 libffi8 libbz2-1.0 zlib1g libmd0 libtinfo6 libsepol2
    rauc libglib2.0-0 libjson-glib-1.0-0 libcurl3-gnutls libbrotli1 libgnutls30 libgssapi-krb5-2
    libidn2-0 libk5crypto3 libkeyutils1 libkrb5-3 libkrb5support0 libldap-2.5-0 libnghttp2-14
    libpsl5 librtmp1 libsasl2-2 libsasl2-modules-db libssh2-1 libcom-err2 libgmp10 libhogweed6
    libnettle8 libtasn1-6 libunistring2 libdb5.3
    fdisk libncursesw6 libreadline8 e2fsprogs libext2fs2 libss2 logsave util-linux)
  # rauc-service: RAUC's D-Bus service (rauc.service, D-Bus activated); its D-Bus policy, which
  # lets anyone call RAUC, is replaced by board/rauc/docent-rauc.conf in root_tree.
  ROOT_ALL=(dbus-system-bus-common dbus-session-bus-common libaudit-common libasound2-data
    rauc-service libjson-glib-1.0-common)
  BASE=$SIM_HOME/rootbase/$A
  # Unpacked again when the list changes (.done holds the list it was made from).
  if [ "$(cat "$BASE/.done" 2>/dev/null)" != "${ROOT_PKGS[*]} ${ROOT_ALL[*]}" ]; then
    fetch_debs "${ROOT_PKGS[@]/%/:$A}" "${ROOT_ALL[@]}"
    rm -rf "$BASE"; mkdir -p "$BASE"
    for p in "${ROOT_PKGS[@]}"; do dpkg-deb -x "$(deb_path "$p" $A)" "$BASE"; done
    for p in "${ROOT_ALL[@]}"; do dpkg-deb -x "$(deb_path "$p")" "$BASE"; done
    rm -rf "$BASE"/usr/share/{doc,man,info,locale,lintian,bug,bash-completion,zsh,fish}
    echo "${ROOT_PKGS[*]} ${ROOT_ALL[*]}" > "$BASE/.done"
  fi
  # The Pi 4's Wi-Fi chip (CYW43455) loads its firmware from the root: non-free-firmware's
  # firmware-brcm80211, of which the image keeps that chip's three files, and wireless-regdb's
  # radio rules.
  if [ $SIM = no ]; then
    WIFI=$SIM_HOME/wifi-firmware
    if [ ! -f "$WIFI/.done" ]; then
      fetch_debs firmware-brcm80211 wireless-regdb
      rm -rf "$WIFI"; mkdir -p "$WIFI"; dpkg-deb -x "$(deb_path firmware-brcm80211)" "$WIFI"
      dpkg-deb -x "$(deb_path wireless-regdb)" "$WIFI"
      touch "$WIFI/.done"
    fi
  fi
  S=$SIM_HOME/speech/$A
  if [ ! -f "$S/.done" ]; then
    apt_priv_update
    mapfile -t PKGS < <(apt_cache_priv depends --recurse --no-recommends --no-suggests --no-conflicts \
        --no-breaks --no-replaces --no-enhances "espeak-ng:$A" "pocketsphinx:$A" pocketsphinx-en-us 2>/dev/null \
      | grep -v '^[ <]' | grep -Ev '^(libatlas|libblis|libopenblas|libelogind|libgomp)' | sort -u)
    fetch_debs "${PKGS[@]}"
    rm -rf "$S"; mkdir -p "$S"
    for p in "${PKGS[@]}"; do dpkg-deb -x "$(deb_path "${p%%:*}" "$A")" "$S"; done
    rm -rf "$S"/usr/share/{doc,man,locale,lintian,bug,bash-completion} "$S"/usr/share/pocketsphinx/model/en-us/*.lm.bin
    # The links update-alternatives would make at installation (BLAS and LAPACK).
    for f in "$S"/usr/lib/*/blas/libblas.so.3 "$S"/usr/lib/*/lapack/liblapack.so.3; do
      [ -f "$f" ] && ln -sf "$(basename "$(dirname "$f")")/$(basename "$f")" "$(dirname "$(dirname "$f")")/"
    done
    touch "$S/.done"
  fi
}

root_tree() { # root_tree DIR: the root file system in DIR (made anew), with initramfs in $W
  local F=$1 R ROOT_KOS INITRD_KOS ROOT_MODS INITRD_MODS RIG CONSOLE APPLETS app t d ko rel
  rm -rf "$F"; mkdir -p "$F"
  cp -a "$BASE/." "$F/"; rm -f "$F/.done"
  cp -a "$S/." "$F/"; rm -f "$F/.done"
  # Merged /usr, as Debian 12 installs it: /bin, /sbin, /lib are links into /usr.
  for d in bin sbin lib; do
    if [ -d "$F/$d" ] && [ ! -L "$F/$d" ]; then
      mkdir -p "$F/usr/$d"; cp -a "$F/$d/." "$F/usr/$d/"; rm -rf "${F:?}/$d"
    fi
    ln -sfn "usr/$d" "$F/$d"
  done
  mkdir -p "$F"/{dev,proc,sys,run,tmp,var,data,root,boot,home,mnt,media,opt,srv,etc/docent,usr/libexec/docent,usr/libexec/board}
  chmod 1777 "$F/tmp"; chmod 0700 "$F/root"
  # systemd-sysv's links: reboot and poweroff ask systemd.
  for t in reboot poweroff halt shutdown; do ln -sfn ../bin/systemctl "$F/usr/sbin/$t"; done
  # busybox for the shell and the small tools (sh, the first-boot script's tr/head, the test
  # rig's wget/base64/httpd), where no package brings the real one.
  cp "$BB" "$F/usr/bin/busybox"
  # (The list comes from this machine's busybox-static: the same package, and arm64 code does
  # not run here.)
  APPLETS=$(busybox --list-full) || die "cannot list busybox applets (install busybox-static)"
  for app in $APPLETS; do
    [ -e "$F/$app" ] || [ -L "$F/$app" ] || ln -s /usr/bin/busybox "$F/$app"
  done
  ln -sfn ../lib/systemd/systemd "$F/usr/sbin/init"
  # The kernel, its modules (those the board uses) and the initramfs.
  # The Pi 4's kernel gzip-compressed (11 of 32 MiB): U-Boot reads a card slowly (under QEMU
  # about 0.5 MiB/s: 63 s for the plain kernel) and unpacks it itself (boot.cmd).
  if [ $SIM = yes ]; then cp "$K/boot/vmlinuz-$KVER" "$F/boot/Image"
  else gzip -9n < "$K/boot/vmlinuz-$KVER" > "$F/boot/Image"; fi
  mods() { # mods MODULE... -> the .ko files with their dependencies, in load order
    for m in "$@"; do modprobe -d "$K" -S "$KVER" --show-depends "$m" >/dev/null || die "no module $m in $KVER"; done
    for m in "$@"; do modprobe -d "$K" -S "$KVER" --show-depends "$m" | awk '$1=="insmod"{print $2}'; done | awk '!seen[$0]++'
  }
  # RAUC's verity bundles: a loop device over the bundle, its squashfs, checked by dm-verity
  # (board/rauc/modules-load.conf loads them at boot).
  RAUC_MODS="loop squashfs dm-verity"
  if [ $SIM = yes ]; then
    ROOT_MODS="$RAUC_MODS virtio_pci virtio_blk ext4 virtio_net virtio-gpu snd-aloop configfs autofs4
      virtio_input evdev"
    INITRD_MODS="virtio_pci virtio_blk ext4"
  else
    # The Pi 4's SD card (emmc2), display (vc4, v3d), USB (PCIe, xhci), Ethernet, Wi-Fi, USB
    # sound cards, input, watchdog, thermal, RNG, I2C/SPI, and what udev autoloads for them.
    ROOT_MODS="sdhci-iproc bcm2835 ext4 vfat vc4 v3d snd-usb-audio genet broadcom mdio-bcm-unimac
      pcie-brcmstb xhci-pci reset-raspberrypi bcm2835_wdt bcm2711_thermal raspberrypi-cpufreq
      clk-raspberrypi hid-generic usbhid evdev brcmfmac i2c-bcm2835 spi-bcm2835 pwm-bcm2835
      bcm2835-rng iproc-rng200 configfs autofs4 $RAUC_MODS"
    # The initramfs: what the device tree says lies between the kernel and the root's SD card
    # (emmc2, its regulators and their GPIOs), the watchdog that resets the board when the
    # root never comes (panic=5 has nothing else to reset it with), and ext4.
    INITRD_MODS="$(python3 "$BOARD_SIM_DIR/dt-modules.py" "$K/usr/lib/linux-image-$KVER/broadcom/$RPI4_DTB" \
      "$K" "$KVER" $RPI4_ROOT_NODE $RPI4_RESET_NODE) ext4" || die "cannot read the Pi 4's device tree"
  fi
  ROOT_KOS=$(mods $ROOT_MODS)
  for ko in $ROOT_KOS; do
    rel=${ko#"$K"}; mkdir -p "$F/usr$(dirname "$rel")"; cp "$ko" "$F/usr$rel"
  done
  if [ $SIM = yes ]; then mkdir -p "$F/usr/lib/modules/$KVER/extra"; cp "$GS" "$F/usr/lib/modules/$KVER/extra/"; fi
  if [ $SIM = no ]; then
    mkdir -p "$F/usr/lib/firmware/brcm" "$F/usr/lib/firmware/cypress"
    cp "$WIFI"/lib/firmware/cypress/cyfmac43455-sdio.{bin,clm_blob} "$F/usr/lib/firmware/cypress/"
    cp -P "$WIFI"/lib/firmware/brcm/brcmfmac43455-sdio.{bin,clm_blob,'raspberrypi,4-model-b.txt'} \
      "$F/usr/lib/firmware/brcm/"
    # The radio rules of the country (cfg80211 asks for them when the Wi-Fi driver loads):
    # Debian's signed copy, which its kernel trusts (what update-alternatives picks).
    cp "$WIFI"/lib/firmware/regulatory.db-debian "$F/usr/lib/firmware/regulatory.db"
    cp "$WIFI"/lib/firmware/regulatory.db.p7s-debian "$F/usr/lib/firmware/regulatory.db.p7s"
  fi
  cp "$K/lib/modules/$KVER"/modules.{order,builtin,builtin.modinfo} "$F/usr/lib/modules/$KVER/"
  depmod -b "$F" "$KVER"
  R=$W/initramfs; rm -rf "$R"; mkdir -p "$R"/{bin,etc,proc,sys,dev,newroot}
  cp "$BB" "$R/bin/busybox"
  for app in sh mount umount insmod sed grep sleep mkdir switch_root; do ln -s busybox "$R/bin/$app"; done
  ln -s bin "$R/sbin"
  INITRD_KOS=$(mods $INITRD_MODS)
  for ko in $INITRD_KOS; do
    rel=${ko#"$K"}; mkdir -p "$R$(dirname "$rel")"; cp "$ko" "$R$rel"; echo "$rel" >> "$R/etc/modules.load"
  done
  install -m 0755 "$GUEST/initramfs-init" "$R/init"
  (cd "$R" && find . | cpio -o -H newc --quiet | gzip -1 > "$F/boot/initrd.img")
  # docent and the board's files, where the Yocto recipe installs them.
  cp "$BIN" "$F/usr/bin/docent"
  install -m 0644 "$BOARD/systemd/docent.service" "$BOARD/systemd/docent-firstboot.service" \
    "$BOARD/systemd/docent-boot-ok.service" "$BOARD/systemd/docent-reboot.path" \
    "$BOARD/systemd/docent-reboot.service" "$BOARD/systemd/docent-update-gate.service" \
    "$BOARD/systemd/docent-grow-data.service" "$BOARD/systemd/data-rauc.mount" \
    "$F/usr/lib/systemd/system/"
  install -m 0644 "$BOARD/systemd/docent-tmpfiles.conf" "$F/usr/lib/tmpfiles.d/docent.conf"
  install -m 0644 "$BOARD/systemd/docent-sysusers.conf" "$F/usr/lib/sysusers.d/docent.conf"
  install -m 0644 "$BOARD/udev/70-docent.rules" "$F/usr/lib/udev/rules.d/70-docent.rules"
  install -m 0755 "$BOARD/firstboot.sh" "$F/usr/libexec/docent/firstboot.sh"
  install -m 0755 "$BOARD/boot/boot-ok.sh" "$F/usr/libexec/docent/boot-ok.sh"
  install -m 0755 "$BOARD/rauc/update-gate.sh" "$F/usr/libexec/docent/update-gate.sh"
  install -m 0755 "$BOARD/grow-data.sh" "$F/usr/libexec/docent/grow-data.sh"
  # RAUC: the board's slots and keyring, who may call it on D-Bus (the package's own policy
  # lets every user install a bundle: it goes), the modules of a verity bundle.
  install -D -m 0644 "$PROFILE/rauc-system.conf" "$F/etc/rauc/system.conf"
  install -m 0644 "$KEYRING" "$F/etc/rauc/keyring.pem"
  rm -f "$F/usr/share/dbus-1/system.d/de.pengutronix.rauc.conf"
  install -m 0644 "$BOARD/rauc/docent-rauc.conf" "$F/usr/share/dbus-1/system.d/docent-rauc.conf"
  install -D -m 0644 "$BOARD/rauc/modules-load.conf" "$F/usr/lib/modules-load.d/rauc.conf"
  install -m 0644 "$BOARD/layout/fw_env.config" "$F/etc/fw_env.config"
  install -m 0644 "$DOCENT_TOML" "$F/etc/docent/docent.toml"
  install -m 0644 "$PROFILE/asound.conf" "$F/etc/asound.conf"
  mkdir -p "$F/etc/systemd/network"
  install -m 0644 "$PROFILE/wired.network" "$F/etc/systemd/network/80-wired.network"
  if [ -f /etc/ssl/certs/ca-certificates.crt ]; then      # as the image's ca-certificates
    mkdir -p "$F/etc/ssl/certs"; cp /etc/ssl/certs/ca-certificates.crt "$F/etc/ssl/certs/"
  fi
  RIG=(); CONSOLE=()
  if [ $SIM = no ]; then
    # The technician's console: a root shell on the serial line (board/raspberrypi4-64/README.md, "Console").
    install -D -m 0644 "$PROFILE/serial-getty.conf" "$F/usr/lib/systemd/system/serial-getty@.service.d/docent.conf"
    install -m 0755 "$PROFILE/console-shell" "$F/usr/libexec/docent/console-shell"
  else
    # The simulated board's serial line is the test rig's shell (board-console.service).
    CONSOLE=(serial-getty@.service)
  fi
  if [ $SIM = yes ]; then  # the test rig (simulated board only)
    install -m 0644 "$GUEST/board-gpio-sim.service" "$GUEST/board-console.service" \
      "$GUEST/board-www.service" "$F/usr/lib/systemd/system/"
    install -m 0755 "$GUEST/gpio-sim" "$F/usr/libexec/board/gpio-sim"
    install -m 0755 "$GUEST/button" "$F/usr/bin/button"
    install -D -m 0644 "$GUEST/modules-load.conf" "$F/etc/modules-load.d/board-sim.conf"
    install -m 0644 "$GUEST/board-touch.rules" "$F/usr/lib/udev/rules.d/71-board-touch.rules"
    RIG=(board-gpio-sim.service board-console.service board-www.service)
  fi
  # /etc, as the image's base files and maintainer scripts leave it (read-only at run time).
  : > "$F/etc/machine-id"
  echo docent > "$F/etc/hostname"
  printf '127.0.0.1 localhost\n127.0.1.1 docent\n::1 localhost\n' > "$F/etc/hosts"
  printf 'passwd: files systemd\ngroup: files systemd\nshadow: files\nhosts: files\n' > "$F/etc/nsswitch.conf"
  cat > "$F/usr/lib/os-release" <<EOF
PRETTY_NAME="docent kiosk $VERSION (Debian 12 packages)"
NAME="docent"
ID=docent
ID_LIKE=debian
VERSION="$VERSION"
VERSION_ID=$VERSION
DOCENT_MIN_VERSION=${DOCENT_MIN_VERSION:-}
VERSION_CODENAME=bookworm
EOF
  ln -sfn ../usr/lib/os-release "$F/etc/os-release"
  cat > "$F/etc/fstab" <<'EOF'
# The root is read-only (ro on the kernel command line, the slot's partition); /data is the
# data partition (board/layout/partitions); /var and /tmp are memory, as nothing on the root
# is written.
PARTLABEL=data  /data  ext4   rw,noatime,nosuid,nodev  0  0
tmpfs           /var   tmpfs  mode=0755,nosuid,nodev   0  0
tmpfs           /tmp   tmpfs  mode=1777,nosuid,nodev   0  0
EOF
  mkdir -p "$F/etc/systemd/journald.conf.d"
  printf '[Journal]\nStorage=volatile\nRuntimeMaxUse=16M\n' > "$F/etc/systemd/journald.conf.d/board.conf"
  systemd-sysusers --root="$F" >/dev/null 2>&1
  systemctl --root="$F" set-default multi-user.target >/dev/null 2>&1
  systemctl --root="$F" enable docent.service docent-firstboot.service docent-boot-ok.service \
    docent-reboot.path docent-update-gate.service docent-grow-data.service data-rauc.mount \
    systemd-networkd.service \
    "${RIG[@]}" >/dev/null 2>&1
  # Units that have nothing to do on the board: no login on the display (docent's), none on
  # the simulated board's serial line (the test rig's shell is there), no clock from a network that does not reach outside, no first-boot wizard
  # (machine-id is made per boot), nothing persistent to seed or commit on a read-only root, no
  # logins (no login sessions, no remount of the root, which stays read-only as the initramfs
  # mounted it), none of the FUSE, hugepage, message-queue or debug file systems, which nothing
  # on the board uses (RAUC's loop and device-mapper modules are loaded by modules-load.d).
  systemctl --root="$F" mask getty@.service "${CONSOLE[@]}" getty-static.service \
    systemd-timesyncd.service systemd-firstboot.service systemd-machine-id-commit.service \
    systemd-random-seed.service systemd-update-utmp.service systemd-update-utmp-runlevel.service \
    systemd-pstore.service systemd-hwdb-update.service systemd-journal-catalog-update.service \
    systemd-sysusers.service ldconfig.service e2scrub_reap.service \
    systemd-remount-fs.service systemd-network-generator.service kmod-static-nodes.service \
    systemd-logind.service systemd-user-sessions.service modprobe@loop.service \
    modprobe@dm_mod.service modprobe@fuse.service modprobe@efi_pstore.service dev-hugepages.mount \
    dev-mqueue.mount sys-kernel-debug.mount sys-kernel-tracing.mount sys-fs-fuse-connections.mount \
    >/dev/null 2>&1
  # D-Bus starts when a client first asks for it (dbus.socket), not at every boot.
  rm -f "$F/usr/lib/systemd/system/multi-user.target.wants/dbus.service"
}

# The test CA of the simulated board and of ./x bundle, made once under the sim home with
# openssl: ca.cert.pem (the image's /etc/rauc/keyring.pem), and a signing key and certificate
# issued by it (signing.{key,cert}.pem), which sign the bundles. A museum uses its own instead
# (README.md, "Updates"): --keyring for the image, --key/--cert for the bundle.
TEST_CA=$SIM_HOME/rauc-ca
test_ca() {
  [ -f "$TEST_CA/signing.cert.pem" ] && return 0
  local d=$TEST_CA
  rm -rf "$d"; mkdir -p "$d"; chmod 0700 "$d"
  log "making the test CA in $d"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 36500 \
    -subj "/O=docent test/CN=docent test CA" -addext "basicConstraints=critical,CA:true" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -keyout "$d/ca.key.pem" -out "$d/ca.cert.pem" 2>/dev/null || die "openssl: the test CA"
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -subj "/O=docent test/CN=docent test bundle signing" \
    -keyout "$d/signing.key.pem" -out "$d/signing.csr" 2>/dev/null || die "openssl: the signing key"
  printf 'basicConstraints=critical,CA:false\nkeyUsage=critical,digitalSignature\n' > "$d/signing.ext"
  openssl x509 -req -in "$d/signing.csr" -CA "$d/ca.cert.pem" -CAkey "$d/ca.key.pem" \
    -CAcreateserial -days 36500 -extfile "$d/signing.ext" -out "$d/signing.cert.pem" 2>/dev/null \
    || die "openssl: the signing certificate"
  rm -f "$d/signing.csr" "$d/signing.ext"
}
