# Stops a build of the docent distro early, with the way out, when a key file of updates is
# missing (conf/distro/docent-os.conf INHERITs it): the fetcher would only say that a file of
# rauc-conf cannot be found. RAUC_KEYRING_FILE goes into the image; RAUC_CERT_FILE and
# RAUC_KEY_FILE sign docent-bundle.
addhandler docent_update_keys_check
docent_update_keys_check[eventmask] = "bb.event.SanityCheck"
python docent_update_keys_check() {
    import os
    missing = [f for f in (e.data.getVar(v) for v in ("RAUC_KEYRING_FILE", "RAUC_CERT_FILE", "RAUC_KEY_FILE"))
               if f and os.path.isabs(f) and not os.path.exists(f)]
    if missing:
        bb.fatal("update keys missing: %s. For development: yocto/meta-docent/scripts/make-dev-ca.sh %s; "
                 "a museum sets DOCENT_RAUC_KEY_DIR to the folder of its own keys "
                 "(meta-docent README, \"Updates\")"
                 % (", ".join(missing), e.data.getVar("DOCENT_RAUC_KEY_DIR")))
}
