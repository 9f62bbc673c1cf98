//! The appliance test: the simulated board (board/sim) boots the image (U-Boot, the A/B boot
//! script, systemd with the board's units, udev rules and tmpfiles, a read-only root), and the
//! test plays the two people who meet a kiosk. The administrator reads the first-boot password
//! from the data partition (it is never printed), logs in over the network, sets a password of
//! their own and sets up a character with a knowledge file and clips; the visitor presses the
//! button (the GPIO simulator line), asks a question into the loopback microphone and hears the
//! answer on the loopback speaker, while the test watches the screen (QEMU's screendump) and
//! the conversation (a WebSocket watcher). The sound card is
//! unplugged while the kiosk speaks and while the button is held, and plugged back; the power
//! is cut during a burst of admin writes; a stalled loop is left to the unit's watchdog and
//! restart policy. A second test proves the boot counting: a slot that cannot boot is left, both
//! counters spent start over, and power cuts during boots do not brick the board.
//!
//! The Raspberry Pi 4 image of `./x image` boots on QEMU's emulated Pi 4 (`rpi4.rs`):
//! to docent serving with its data partition grown, and, with a root that never comes, reset by
//! its watchdog into the other slot.
//!
//! Ignored by `cargo test`: it needs the board image. `./x appliance` (part of `./x test`)
//! builds it and runs these tests; `./x appliance-long` the slower ones (`long_`), among them a
//! fleet update from the fleet tests' fake hawkBit server.
//!
//! One module per scenario; the board rig and what the scenarios share are in the
//! `docent-test-support` crate (`board`, `appliance`).

mod boot;
mod fleet;
mod long;
mod rpi4;
mod updates;
mod visitor;
