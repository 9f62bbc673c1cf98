//! The gRPC contract generated from `proto/` (package `cyberverse`): the `VoiceLLMService`
//! server the kiosk offers and the client its `remote` provider uses.

#![allow(clippy::all, missing_docs)]

tonic::include_proto!("cyberverse");
