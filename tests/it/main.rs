//! The integration tests, in one binary (one link instead of one per file): each module is one
//! area, driving a real server on 127.0.0.1 (in this process or the built `docent` binary) with a
//! real client. The simulated-board test is `tests/appliance/`, a binary of its own.

// The support shared with the appliance test and the benchmarks (tests/support), by its old name.
use docent_test_support as support;

mod access;
mod availability;
mod board_files;
mod characters;
mod choosing;
mod console;
mod console_faq;
mod console_staff;
mod conversations;
mod crash;
mod device;
mod display;
mod engine;
mod faq;
mod faults;
mod first_boot;
mod fleet;
mod fuzz_corpus;
mod hostile_lan;
mod hours;
mod knowledge;
mod languages;
mod licenses;
mod limits;
mod listener;
mod maintenance;
mod mdns;
mod metrics;
mod no_audio;
mod openapi;
mod privacy;
mod realtime_provider;
mod realtime_smoke;
mod recordings;
mod screen_questions;
mod sessions_tasks;
mod site_admin;
mod smoke;
mod soak;
mod system;
mod tidy;
mod understanding;
mod updates;
mod watchdog;
mod wyoming;
