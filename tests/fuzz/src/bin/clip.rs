//! The idle clip reader: MP4 parsing, the H.264 check of uploads, and the first frames
//! decoded as the display would.

use docent::device::display::clip::{Clip, ClipDecoder};
use docent::engine::media::is_h264_mp4;

/// Frames decoded per input: enough to pass the parameter sets and loop once on short clips.
const FRAMES: usize = 4;

fn main() {
    afl::fuzz!(|data: &[u8]| {
        let _ = is_h264_mp4(data);
        let Ok(clip) = Clip::from_bytes(data.to_vec()) else {
            return;
        };
        let _ = (clip.size(), clip.frame_count(), clip.frames_per_second());
        let Ok(mut decoder) = ClipDecoder::new(clip) else {
            return;
        };
        for _ in 0..FRAMES {
            if decoder.next_frame(|_| {}).is_err() {
                break;
            }
        }
    });
}
