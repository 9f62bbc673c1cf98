//! VoiceLLMService messages: the protobuf decoding of every message the kiosk reads (the
//! server's inputs, and the outputs its `remote` provider reads from another service), the
//! bounds of a seeded history, and a real `Interrupt` call through the router (gRPC framing,
//! decoding, the handler).

use docent::engine::access::check_context;
use docent::proto::{
    CheckVoiceRequest, InterruptRequest, VoiceLlmInput, VoiceLlmOutput, voice_llm_input::Input,
};
use docent_fuzz::Kiosk;
use prost::Message;

fn main() {
    // A panic aborts the process (AFL++ records the input), so nothing is observed after one.
    let kiosk = std::panic::AssertUnwindSafe(Kiosk::start());
    afl::fuzz!(|data: &[u8]| {
        let Some((&kind, msg)) = data.split_first() else {
            return;
        };
        match kind % 4 {
            0 => {
                if let Ok(VoiceLlmInput {
                    input: Some(Input::Config(c)),
                }) = VoiceLlmInput::decode(msg)
                {
                    let items: Vec<(String, String)> = c
                        .dialog_context
                        .iter()
                        .map(|i| (i.role.clone(), i.text.clone()))
                        .collect();
                    let _ = check_context(&items);
                }
            }
            1 => {
                let _ = VoiceLlmOutput::decode(msg);
            }
            2 => {
                let _ = CheckVoiceRequest::decode(msg);
                let _ = InterruptRequest::decode(msg);
            }
            _ => {
                // One length-prefixed gRPC frame, uncompressed.
                let mut body = vec![0];
                body.extend_from_slice(&(msg.len() as u32).to_be_bytes());
                body.extend_from_slice(msg);
                kiosk.send(
                    "POST",
                    "/cyberverse.VoiceLLMService/Interrupt",
                    "application/grpc",
                    body,
                );
            }
        }
    });
}
