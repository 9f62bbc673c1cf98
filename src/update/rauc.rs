//! RAUC's D-Bus interface (`de.pengutronix.rauc.Installer` on the system bus), as far as docent
//! uses it. Only the methods RAUC 1.8 (Debian 12) already has: `Info` checks a bundle's signature
//! and reads its manifest without writing anything.

use std::collections::HashMap;

use zbus::{OwnedVariant, Variant};

#[zbus::proxy(
    interface = "de.pengutronix.rauc.Installer",
    default_service = "de.pengutronix.rauc",
    default_path = "/"
)]
pub trait Installer {
    /// The bundle's compatible and version, after RAUC checked its signature.
    fn info(&self, bundle: &str) -> zbus::Result<(String, String)>;

    /// Starts installing; `Completed` says how it ended.
    fn install_bundle(&self, source: &str, args: HashMap<&str, Variant<'_>>) -> zbus::Result<()>;

    /// `state`: good, bad or active; `slot`: booted, other or a slot name.
    fn mark(&self, state: &str, slot: &str) -> zbus::Result<(String, String)>;

    fn get_slot_status(&self) -> zbus::Result<Vec<(String, HashMap<String, OwnedVariant>)>>;

    /// The slot the boot loader will boot next (a slot name such as `rootfs.1`).
    fn get_primary(&self) -> zbus::Result<String>;

    #[zbus(property)]
    fn operation(&self) -> zbus::Result<String>;

    #[zbus(property)]
    fn last_error(&self) -> zbus::Result<String>;

    /// Percent, message, nesting depth.
    #[zbus(property)]
    fn progress(&self) -> zbus::Result<(i32, String, i32)>;

    #[zbus(property)]
    fn compatible(&self) -> zbus::Result<String>;

    /// The booted slot's boot name (`A`, `B`).
    #[zbus(property)]
    fn boot_slot(&self) -> zbus::Result<String>;

    #[zbus(signal)]
    fn completed(&self, result: i32) -> zbus::Result<()>;
}

/// The message of a D-Bus error (RAUC's own words), without the error's name.
pub fn message(e: &zbus::Error) -> String {
    match e {
        zbus::Error::MethodError(_, Some(text), _) => text.clone(),
        other => other.to_string(),
    }
}

/// The boot name (`A`, `B`) of the slot named `slot` (`rootfs.1`).
pub async fn bootname(rauc: &InstallerProxy<'_>, slot: &str) -> zbus::Result<Option<String>> {
    Ok(rauc
        .get_slot_status()
        .await?
        .into_iter()
        .find(|(name, _)| name == slot)
        .and_then(|(_, status)| {
            status
                .get("bootname")
                .and_then(|v| String::try_from(v.clone()).ok())
        }))
}
