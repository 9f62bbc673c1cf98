//! The kiosk loop: idle -> listening -> processing -> speaking -> idle, for the in-person visitor.
