//! Recognising uploaded media by content, never by the name or type a client claims; `clip`
//! demuxes and decodes idle clips (the display plays them with it) and `flash` checks an uploaded
//! clip for flashes that could cause seizures.

pub mod clip;
pub mod flash;
pub mod sound;

/// The image types an avatar may have, with their MIME type and file extension.
pub fn sniff_image(bytes: &[u8]) -> Option<(&'static str, &'static str)> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some(("image/png", "png"))
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some(("image/jpeg", "jpg"))
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some(("image/gif", "gif"))
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some(("image/webp", "webp"))
    } else {
        None
    }
}

/// The MIME type for a served file name (used when the stored type is unknown).
pub fn mime_for_name(name: &str) -> &'static str {
    let ext = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    match ext.as_deref() {
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("gif") => "image/gif",
        Some("webp") => "image/webp",
        Some("mp4" | "m4v") => "video/mp4",
        _ => "application/octet-stream",
    }
}

/// Whether `bytes` is an MP4 file with an H.264 video track (`avc1`/`avc3` sample entry), the
/// only kind of clip the kiosk's decoder plays.
pub fn is_h264_mp4(bytes: &[u8]) -> bool {
    let top: Vec<_> = Boxes(bytes).collect();
    if top.first().map(|(t, _)| t) != Some(b"ftyp") {
        return false;
    }
    let Some((_, moov)) = top.iter().find(|(t, _)| t == b"moov") else {
        return false;
    };
    Boxes(moov).filter(|(t, _)| t == b"trak").any(|(_, trak)| {
        let stsd = child(trak, b"mdia")
            .and_then(|b| child(b, b"minf"))
            .and_then(|b| child(b, b"stbl"))
            .and_then(|b| child(b, b"stsd"));
        // stsd: version+flags (4), entry count (4), then sample entries as boxes.
        stsd.filter(|s| s.len() > 8)
            .is_some_and(|s| Boxes(&s[8..]).any(|(t, _)| &t == b"avc1" || &t == b"avc3"))
    })
}

fn child<'a>(parent: &'a [u8], kind: &[u8; 4]) -> Option<&'a [u8]> {
    Boxes(parent).find(|(t, _)| t == kind).map(|(_, b)| b)
}

/// Iterates the ISO-BMFF boxes of a buffer as (type, payload); stops at the first malformed one.
struct Boxes<'a>(&'a [u8]);

impl<'a> Iterator for Boxes<'a> {
    type Item = ([u8; 4], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let data = self.0;
        if data.len() < 8 {
            return None;
        }
        let size32 = u32::from_be_bytes(data[..4].try_into().ok()?) as u64;
        let kind: [u8; 4] = data[4..8].try_into().ok()?;
        let (header, size) = match size32 {
            0 => (8, data.len() as u64),
            1 => (16, u64::from_be_bytes(data.get(8..16)?.try_into().ok()?)),
            n => (8, n),
        };
        if size < header as u64 || size > data.len() as u64 {
            self.0 = &[];
            return None;
        }
        let size = size as usize;
        self.0 = &data[size..];
        Some((kind, &data[header..size]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mp4_box(kind: &[u8; 4], payload: &[u8]) -> Vec<u8> {
        let mut out = ((payload.len() + 8) as u32).to_be_bytes().to_vec();
        out.extend_from_slice(kind);
        out.extend_from_slice(payload);
        out
    }

    fn mp4_with(entry: &[u8; 4]) -> Vec<u8> {
        let mut stsd = vec![0, 0, 0, 0, 0, 0, 0, 1];
        stsd.extend(mp4_box(entry, &[0; 16]));
        let stbl = mp4_box(b"stbl", &mp4_box(b"stsd", &stsd));
        let trak = mp4_box(b"trak", &mp4_box(b"mdia", &mp4_box(b"minf", &stbl)));
        let mut file = mp4_box(b"ftyp", b"isom\0\0\0\0");
        file.extend(mp4_box(b"moov", &trak));
        file
    }

    #[test]
    fn recognises_h264_mp4_only() {
        assert!(is_h264_mp4(&mp4_with(b"avc1")));
        assert!(!is_h264_mp4(&mp4_with(b"hev1")));
        assert!(!is_h264_mp4(b"not a video at all"));
        let mut truncated = mp4_with(b"avc1");
        truncated.truncate(30);
        assert!(!is_h264_mp4(&truncated));
    }

    #[test]
    fn sniffs_images_by_content() {
        assert_eq!(
            sniff_image(b"\x89PNG\r\n\x1a\nrest").unwrap().0,
            "image/png"
        );
        assert_eq!(sniff_image(&[0xFF, 0xD8, 0xFF, 0xE0]).unwrap().1, "jpg");
        assert_eq!(sniff_image(b"GIF89a...").unwrap().0, "image/gif");
        assert_eq!(
            sniff_image(b"RIFF\0\0\0\0WEBPVP8 ").unwrap().0,
            "image/webp"
        );
        assert!(sniff_image(b"<svg xmlns=...>").is_none());
        assert!(sniff_image(b"").is_none());
    }
}
