//! Microphone and speaker through ALSA.
