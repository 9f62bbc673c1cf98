SUMMARY = "SphinxBase: the support library of PocketSphinx"
DESCRIPTION = "Feature extraction, language model and audio input code shared by the CMU \
               Sphinx speech recognisers."
# homepageping fetches HOMEPAGE over the network: CI lints offline.
# nooelint: oelint.vars.homepageping
HOMEPAGE = "https://cmusphinx.github.io/"
BUGTRACKER = "https://github.com/cmusphinx/sphinxbase/issues"
SECTION = "libs"
CVE_PRODUCT = "sphinxbase"
LICENSE = "BSD-2-Clause"
LIC_FILES_CHKSUM = "file://LICENSE;md5=b15c818b9504393d35df76807094a51c"

# The JSGF grammar parser is generated with bison; audio input (libsphinxad) uses ALSA.
DEPENDS = "alsa-lib bison-native"

# The upstream 5prealpha release, as Debian 12 packages it (0.8+5prealpha+1): the version
# docent's offline engine is tested with (upstream released it as a tarball only: no git tag).
SRC_URI = "${DEBIAN_MIRROR}/main/s/sphinxbase/sphinxbase_0.8+5prealpha+1.orig.tar.gz"
SRC_URI[sha256sum] = "f72bdb59e50b558bed47cc2105777200d2b246a0f328e913de16a9b22f9a246f"

UPSTREAM_CHECK_URI = "https://sourceforge.net/projects/cmusphinx/files/sphinxbase/"
UPSTREAM_CHECK_REGEX = "sphinxbase-(?P<pver>\d+\w+)\.tar"

inherit autotools pkgconfig

EXTRA_OECONF = "--without-python --without-lapack"

BBCLASSEXTEND = "native"
