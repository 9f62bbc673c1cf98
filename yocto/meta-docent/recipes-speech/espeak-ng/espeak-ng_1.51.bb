SUMMARY = "eSpeak NG: multi-lingual formant speech synthesizer"
DESCRIPTION = "Compact text-to-speech synthesizer for about 100 languages. docent runs the \
               espeak-ng program (never links the library: it is GPL) as its offline voice."
# homepageping fetches HOMEPAGE over the network: CI lints offline.
# nooelint: oelint.vars.homepageping
HOMEPAGE = "https://github.com/espeak-ng/espeak-ng"
BUGTRACKER = "https://github.com/espeak-ng/espeak-ng/issues"
SECTION = "sound"
CVE_PRODUCT = "espeak-ng"
# The program and library: GPLv3+ (COPYING). getopt.c for Windows: BSD-2-Clause (not built
# here, listed as upstream ships it). src/ucd-tools carries Unicode character data (COPYING.UCD).
LICENSE = "GPL-3.0-or-later & BSD-2-Clause & Unicode-DFS-2015"
LIC_FILES_CHKSUM = "file://COPYING;md5=d32239bcb673463ab874e80d47fae504 \
                    file://COPYING.BSD2;md5=3348c29aeaacdead1532a5048b3eb587 \
                    file://COPYING.UCD;md5=9bc437a2583c6de495e5c4acd7c2c787 \
                    "

# espeak-ng-data (phoneme tables, dictionaries) is compiled by running the espeak-ng program
# just built, which a cross build cannot run. The native build compiles it and the target
# package takes it from there: the data is the same on every little-endian machine (x86-64
# build host, aarch64 target). The target build makes only the programs and the library.
DEPENDS:append:class-target = " espeak-ng-native"

# Tag 1.51, the version Debian 12 ships (which docent's offline engine is tested with).
SRC_URI = "git://github.com/espeak-ng/espeak-ng.git;protocol=https;branch=master"
SRCREV = "2e9a5fccbb0095e87b2769e9249ea1f821918ecd"

inherit autotools pkgconfig

# Speech is written to stdout (--stdout) by docent: no audio output library, no MBROLA voices,
# no extended (large) dictionaries, no async command queue.
EXTRA_OECONF = "--disable-rpath \
                --with-pcaudiolib=no \
                --with-sonic=no \
                --with-mbrola=no \
                --with-async=no \
                --with-extdict-ru=no \
                --with-extdict-cmn=no \
                --with-extdict-yue=no \
                "

do_compile:class-target() {
    oe_runmake src/libespeak-ng.la src/espeak-ng src/speak-ng
}

do_install:class-target() {
    oe_runmake DESTDIR=${D} install-exec install-espeak_includeHEADERS \
        install-espeak_ng_includeHEADERS install-pkgconfigDATA
    install -d ${D}${datadir}
    cp -R --no-preserve=ownership ${STAGING_DATADIR_NATIVE}/espeak-ng-data ${D}${datadir}/
}

FILES:${PN} += "${datadir}/espeak-ng-data"

BBCLASSEXTEND = "native"
