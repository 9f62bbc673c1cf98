SUMMARY = "PocketSphinx: lightweight offline speech recogniser"
DESCRIPTION = "Speaker-independent continuous speech recogniser from CMU Sphinx, with the \
               US English acoustic model, dictionary and language model. docent runs \
               pocketsphinx_continuous on each recorded question (offline engine)."
# homepageping fetches HOMEPAGE over the network: CI lints offline.
# nooelint: oelint.vars.homepageping
HOMEPAGE = "https://cmusphinx.github.io/"
BUGTRACKER = "https://github.com/cmusphinx/pocketsphinx/issues"
SECTION = "sound"
CVE_PRODUCT = "pocketsphinx"
LICENSE = "BSD-2-Clause"
LIC_FILES_CHKSUM = "file://LICENSE;md5=98034d99abfdcf2712d3a07e6df00b21"

DEPENDS = "sphinxbase"

# The upstream 5prealpha release (the last with pocketsphinx_continuous), as Debian 12
# packages it (0.8+5prealpha+1): the version docent's offline engine is tested with.
SRC_URI = "${DEBIAN_MIRROR}/main/p/pocketsphinx/pocketsphinx_0.8+5prealpha+1.orig.tar.gz"
SRC_URI[sha256sum] = "ef5bb5547e2712bdf571f256490ef42a47962033892efd9d7df8eed7fe573ed9"

UPSTREAM_CHECK_URI = "https://sourceforge.net/projects/cmusphinx/files/pocketsphinx/"
UPSTREAM_CHECK_REGEX = "pocketsphinx-(?P<pver>\d+\w+)\.tar"

inherit autotools pkgconfig

# No Python module, and no GStreamer plugin (configure skips it when cross compiling).
EXTRA_OECONF = "--without-python --with-sphinxbase=auto"

# The model where Debian's pocketsphinx-en-us puts it (docent looks there):
# ${datadir}/pocketsphinx/model/en-us/{en-us/,cmudict-en-us.dict,en-us.lm.bin}.
PACKAGES =+ "${PN}-en-us"
FILES:${PN}-en-us += "${datadir}/pocketsphinx/model/en-us"
RRECOMMENDS:${PN} = "${PN}-en-us"

BBCLASSEXTEND = "native"
