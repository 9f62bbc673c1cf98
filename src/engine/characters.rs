//! Characters and their media: avatar images and the idle clips made from them.

use std::sync::{Arc, Mutex};

use redb::{ReadableTable, ReadableTableMetadata, WriteTransaction};
use serde::{Deserialize, Serialize};

use super::error::{Error, Result, bad, not_found};
use super::language::Language;
use super::providers::{Choice, Provider};
use super::{CharacterId, Engine, check_segment, is_id, media};
use crate::store::records::{Character, Clip, Components, Image};
use crate::store::tables::{CHARACTERS, CLIPS, DAILY, IMAGES, MESSAGES, SESSIONS};
use crate::store::{self, BlobRef, blobs};

const TEXT_MAX_CHARS: usize = 20_000;
const TAGS_MAX: usize = 50;
pub const CLIP_STATES: &[&str] = &["idle", "listening", "speaking"];

/// Declares a struct with the editable fields of a character (then the struct's own fields), so
/// that what a client sends and what the API shows cannot drift apart.
macro_rules! editable_fields {
    ($(#[$meta:meta])* pub struct $name:ident { $($own:tt)* }) => {
        $(#[$meta])*
        pub struct $name {
            pub name: String,
            pub description: String,
            pub use_face_crop: bool,
            pub mode: String,
            pub voice_provider: String,
            pub voice_type: String,
            pub components: Components,
            pub speaking_style: String,
            pub personality: String,
            pub welcome_message: String,
            pub system_prompt: String,
            pub tags: Vec<String>,
            pub image_mode: String,
            /// The voice of each language other than the default (a language tag -> a voice
            /// of the speaking provider); `voice_type` speaks the others.
            #[schema(value_type = std::collections::BTreeMap<String, String>)]
            pub voices: std::collections::BTreeMap<Language, String>,
            $($own)*
        }
    };
}

editable_fields! {
    /// The editable fields of a character, as a client sends them. Absent text fields become "";
    /// `images`, `active_image` and `avatar_image` are not fields here, so a client's copies are
    /// ignored.
    #[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
    #[serde(default)]
    pub struct CharacterInput {}
}

editable_fields! {
    /// A character as the API shows it.
    #[derive(Debug, Serialize, utoipa::ToSchema)]
    pub struct CharacterView {
        pub id: String,
        pub avatar_image: String,
        pub images: Vec<ImageView>,
        pub active_image: String,
        pub created_at: String,
        pub updated_at: String,
        pub idle_video_url: String,
        pub idle_video_urls: Vec<String>,
        /// Read-only: the provider fields naming a provider this kiosk does not have.
        pub not_on_this_kiosk: Vec<ForeignField>,
    }
}

/// A provider field of a character that names one of the original front end's providers.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct ForeignField {
    pub field: &'static str,
    pub provider: &'static str,
}

/// The provider fields of `c` that name a provider this kiosk does not have.
pub fn foreign_fields(c: &Character) -> Vec<ForeignField> {
    [
        ("voice_provider", &c.voice_provider),
        ("components.llm", &c.components.llm),
        ("components.asr", &c.components.asr),
        ("components.tts", &c.components.tts),
    ]
    .into_iter()
    .filter_map(|(field, id)| match Choice::parse(id) {
        Some(Choice::Foreign(f)) => Some(ForeignField {
            field,
            provider: f.id(),
        }),
        _ => None,
    })
    .collect()
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ImageView {
    pub filename: String,
    pub orig_name: String,
    pub added_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// What activating an image changes, as the API reports it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Activation {
    pub active_image: String,
    pub avatar_image: String,
    pub idle_video_url: String,
    pub idle_video_urls: Vec<String>,
}

/// The serialised character list and the characters naming a provider this kiosk does not
/// have (the health route's), rebuilt after a change: listing is the kiosk's hottest read. The
/// generation tells a list built from a read that a write overtook, which is not kept.
#[derive(Default)]
pub struct ListCache(Mutex<(u64, Option<Arc<Listed>>)>);

/// What [`ListCache`] keeps.
struct Listed {
    /// The list as the API answers it (shared, never copied).
    json: bytes::Bytes,
    /// (id, name, fields) of each character with foreign provider fields, by id.
    foreign: Vec<(String, String, Vec<ForeignField>)>,
}

impl ListCache {
    pub(super) fn invalidate(&self) {
        let mut cache = self.0.lock().expect("cache lock");
        cache.0 += 1;
        cache.1 = None;
    }
}

impl CharacterInput {
    /// Checks a character's rules (see docs/api.md) and normalises (`voice_llm` -> `omni`,
    /// trimmed name).
    fn validate(mut self) -> Result<CharacterInput> {
        self.name = self.name.trim().to_string();
        let n = self.name.chars().count();
        if n == 0 || n > 100 {
            return Err(bad("name is required and must be 1 to 100 characters"));
        }
        self.mode = match self.mode.as_str() {
            "" | "standard" => "standard".into(),
            "omni" | "voice_llm" => "omni".into(),
            other => return Err(bad(format!("mode must be omni or standard, not {other:?}"))),
        };
        self.image_mode = match self.image_mode.as_str() {
            "" | "fixed" => "fixed".into(),
            "random" => "random".into(),
            other => {
                return Err(bad(format!(
                    "image_mode must be fixed or random, not {other:?}"
                )));
            }
        };
        for (field, value) in [
            ("voice_provider", &self.voice_provider),
            ("components.llm", &self.components.llm),
            ("components.asr", &self.components.asr),
            ("components.tts", &self.components.tts),
        ] {
            if !value.is_empty() && Choice::parse(value).is_none() {
                return Err(bad(format!(
                    "{field} must be one of {}, not {value:?}",
                    Provider::ids()
                )));
            }
        }
        crate::engine::voice::check_stored(&self.voice_type)
            .map_err(|e| bad(format!("voice_type: {e}")))?;
        for (field, value) in [
            ("description", &self.description),
            ("voice_type", &self.voice_type),
            ("speaking_style", &self.speaking_style),
            ("personality", &self.personality),
            ("welcome_message", &self.welcome_message),
            ("system_prompt", &self.system_prompt),
        ] {
            if value.chars().count() > TEXT_MAX_CHARS {
                return Err(bad(format!(
                    "{field} is longer than {TEXT_MAX_CHARS} characters"
                )));
            }
        }
        if self.tags.len() > TAGS_MAX || self.tags.iter().any(|t| t.chars().count() > 100) {
            return Err(bad(format!(
                "at most {TAGS_MAX} tags of up to 100 characters"
            )));
        }
        crate::engine::providers::speech::check_saved_voice(
            &self.voice_provider,
            &self.voice_type,
        )?;
        if self.voices.len() > crate::engine::settings::MAX_LANGUAGES {
            return Err(bad(format!(
                "voices: at most {} languages",
                crate::engine::settings::MAX_LANGUAGES
            )));
        }
        for (language, voice) in &self.voices {
            crate::engine::voice::check_stored(voice)
                .map_err(|e| bad(format!("voices.{language}: {e}")))?;
            crate::engine::providers::speech::check_saved_voice(&self.voice_provider, voice)
                .map_err(|e| bad(format!("voices.{language}: {e}")))?;
        }
        Ok(self)
    }

    fn apply(self, c: &mut Character) {
        c.name = self.name;
        c.description = self.description;
        c.use_face_crop = self.use_face_crop;
        c.mode = self.mode;
        c.voice_provider = self.voice_provider;
        c.voice_type = self.voice_type;
        c.components = self.components;
        c.speaking_style = self.speaking_style;
        c.personality = self.personality;
        c.welcome_message = self.welcome_message;
        c.system_prompt = self.system_prompt;
        c.tags = self.tags;
        c.image_mode = self.image_mode;
        c.voices = self
            .voices
            .into_iter()
            .map(|(l, v)| (l.tag().to_string(), v))
            .collect();
    }
}

fn image_url(character: &str, filename: &str) -> String {
    format!("/api/v1/characters/{character}/images/{filename}")
}

fn clip_url(character: &str, clip: &Clip) -> String {
    if clip.variant.is_empty() {
        format!(
            "/api/v1/characters/{character}/idle-videos/{}/{}",
            clip.imgbase, clip.filename
        )
    } else {
        format!(
            "/api/v1/characters/{character}/idle-videos/{}/{}/{}",
            clip.imgbase, clip.variant, clip.filename
        )
    }
}

/// The base name of an image file (`img_001.png` -> `img_001`), which names its clips.
pub fn image_base(filename: &str) -> &str {
    filename.rsplit_once('.').map_or(filename, |(b, _)| b)
}

fn clip_key(character: &str, imgbase: &str, variant: &str, filename: &str) -> String {
    store::key(&[character, imgbase, variant, filename])
}

impl Engine {
    pub(super) fn ensure_default_character(&self) -> Result<()> {
        let tx = self.store.write()?;
        if tx.open_table(CHARACTERS)?.is_empty()? && !store::meta_flag(&tx, "default_character")? {
            let input = CharacterInput {
                name: "Docent".into(),
                description: "The kiosk's guide to this exhibition.".into(),
                voice_provider: "local".into(),
                voice_type: "en-us".into(),
                personality: "Friendly, patient and precise. Answers in two or three short \
                               sentences and says so when it does not know."
                    .into(),
                speaking_style: "Warm and clear, for visitors of every age.".into(),
                welcome_message: "Hello! I'm Docent. Hold the button and ask me anything \
                                  about the exhibition."
                    .into(),
                ..Default::default()
            };
            let c = insert_character(&tx, input.validate()?)?;
            store::set_meta_flag(&tx, "default_character")?;
            tracing::info!(id = %c.id, "created the default character");
        }
        tx.commit()?;
        Ok(())
    }

    /// The JSON array of all characters, oldest first.
    pub fn characters_json(&self) -> Result<bytes::Bytes> {
        Ok(self.listed()?.json.clone())
    }

    fn listed(&self) -> Result<Arc<Listed>> {
        let generation = {
            let cache = self.characters.0.lock().expect("cache lock");
            if let Some(listed) = &cache.1 {
                return Ok(listed.clone());
            }
            cache.0
        };
        let tx = self.store.read()?;
        let table = tx.open_table(CHARACTERS)?;
        let mut all = Vec::new();
        for item in table.iter()? {
            let (_, v) = item?;
            all.push(store::from_json::<Character>(v.value())?);
        }
        all.sort_by(|a, b| (&a.created_at, &a.id).cmp(&(&b.created_at, &b.id)));
        let views = all
            .into_iter()
            .map(|c| view(&tx, c))
            .collect::<Result<Vec<_>>>()?;
        let json = serde_json::to_vec(&views).expect("views serialise").into();
        let mut foreign: Vec<_> = views
            .into_iter()
            .filter(|v| !v.not_on_this_kiosk.is_empty())
            .map(|v| (v.id, v.name, v.not_on_this_kiosk))
            .collect();
        foreign.sort_by(|a, b| a.0.cmp(&b.0));
        let listed = Arc::new(Listed { json, foreign });
        let mut cache = self.characters.0.lock().expect("cache lock");
        if cache.0 == generation {
            cache.1 = Some(listed.clone());
        }
        Ok(listed)
    }

    pub fn character(&self, id: &CharacterId) -> Result<CharacterView> {
        let tx = self.store.read()?;
        let c = load(&tx.open_table(CHARACTERS)?, id)?;
        view(&tx, c)
    }

    /// Every character whose provider fields name a provider this kiosk does not have, as
    /// (id, name, fields), for the health route.
    pub fn characters_not_on_this_kiosk(&self) -> Result<Vec<(String, String, Vec<ForeignField>)>> {
        Ok(self.listed()?.foreign.clone())
    }

    /// The stored record, for the engine's own use (prompts, voices).
    pub fn character_record(&self, id: &CharacterId) -> Result<Character> {
        let tx = self.store.read()?;
        load(&tx.open_table(CHARACTERS)?, id)
    }

    pub fn create_character(&self, input: CharacterInput) -> Result<CharacterView> {
        let input = input.validate()?;
        let tx = self.store.write()?;
        let c = insert_character(&tx, input)?;
        tx.commit()?;
        self.characters.invalidate();
        self.character(&CharacterId::of_record(&c.id))
    }

    pub fn update_character(
        &self,
        id: &CharacterId,
        input: CharacterInput,
    ) -> Result<CharacterView> {
        let input = input.validate()?;
        let tx = self.store.write()?;
        {
            let mut table = tx.open_table(CHARACTERS)?;
            let mut c = load(&table, id)?;
            input.apply(&mut c);
            c.updated_at = store::now();
            table.insert(id.as_str(), store::to_json(&c).as_slice())?;
        }
        tx.commit()?;
        self.characters.invalidate();
        self.character(id)
    }

    /// Deletes a character with everything that belongs to it: images, clips, knowledge,
    /// history and live sessions.
    pub fn delete_character(&self, id: &CharacterId) -> Result<()> {
        let tx = self.store.write()?;
        let mut dropped: Vec<BlobRef> = Vec::new();
        {
            let mut table = tx.open_table(CHARACTERS)?;
            let c = load(&table, id)?;
            dropped.extend(c.recordings.into_iter().map(|r| r.blob));
            table.remove(id.as_str())?;
        }
        {
            let (lo, hi) = store::prefix_bounds(id);
            let mut images = tx.open_table(IMAGES)?;
            for item in images.extract_from_if(lo.as_str()..hi.as_str(), |_, _| true)? {
                dropped.push(store::from_json::<Image>(item?.1.value())?.blob);
            }
            let mut clips = tx.open_table(CLIPS)?;
            for item in clips.extract_from_if(lo.as_str()..hi.as_str(), |_, _| true)? {
                dropped.push(store::from_json::<Clip>(item?.1.value())?.blob);
            }
        }
        dropped.extend(self.remove_knowledge_of(&tx, id)?);
        tx.open_table(MESSAGES)?
            .retain_in((id.as_str(), 0)..=(id.as_str(), u64::MAX), |_, _| false)?;
        tx.open_table(DAILY)?
            .retain_in((id.as_str(), "")..=(id.as_str(), "~"), |_, _| false)?;
        let sessions = {
            let mut table = tx.open_table(SESSIONS)?;
            let mut ended = Vec::new();
            table.retain(|sid, v| {
                let ours = store::from_json::<crate::store::records::Session>(v)
                    .is_ok_and(|s| s.character_id == id.as_str());
                if ours {
                    ended.push(sid.to_string());
                }
                !ours
            })?;
            ended
        };
        for b in &dropped {
            blobs::unregister(&tx, b)?;
        }
        tx.commit()?;
        self.store.blobs().remove_all(&dropped);
        self.characters.invalidate();
        for s in sessions {
            self.session_ended(&s);
        }
        Ok(())
    }

    /// Stores a new avatar image (recognised by content) and returns its name; the first image
    /// of a character becomes active.
    pub fn add_image(&self, id: &CharacterId, orig_name: &str, bytes: &[u8]) -> Result<Image> {
        let (mime, ext) = media::sniff_image(bytes).ok_or_else(|| {
            Error::UnsupportedMedia("avatar must be a PNG, JPEG, WebP or GIF image".into())
        })?;
        self.character_record(id)?;
        let blob = self.store.blobs().put(bytes, mime)?;
        let stored = (|| {
            let tx = self.store.write()?;
            let image = {
                let mut chars = tx.open_table(CHARACTERS)?;
                let mut c = load(&chars, id)?;
                c.next_image += 1;
                let image = Image {
                    filename: format!("img_{:03}.{ext}", c.next_image),
                    orig_name: orig_name.chars().take(255).collect(),
                    added_at: store::now(),
                    blob: blob.clone(),
                };
                if c.active_image.is_empty() {
                    c.active_image = image.filename.clone();
                }
                c.updated_at = image.added_at.clone();
                chars.insert(id.as_str(), store::to_json(&c).as_slice())?;
                tx.open_table(IMAGES)?.insert(
                    store::key(&[id, &image.filename]).as_str(),
                    store::to_json(&image).as_slice(),
                )?;
                image
            };
            blobs::register(&tx, &blob)?;
            tx.commit()?;
            Ok(image)
        })();
        if stored.is_err() {
            self.store.blobs().remove_all(std::slice::from_ref(&blob));
        }
        self.characters.invalidate();
        stored
    }

    /// A character's images, the active one first.
    pub fn images(&self, id: &CharacterId) -> Result<Vec<ImageView>> {
        let tx = self.store.read()?;
        let c = load(&tx.open_table(CHARACTERS)?, id)?;
        let mut images: Vec<Image> = store::scan(&tx.open_table(IMAGES)?, id)?;
        images.sort_by_key(|i| i.filename != c.active_image);
        Ok(images
            .into_iter()
            .map(|i| ImageView {
                url: Some(image_url(id, &i.filename)),
                filename: i.filename,
                orig_name: i.orig_name,
                added_at: i.added_at,
            })
            .collect())
    }

    pub fn image(&self, id: &str, filename: &str) -> Result<Image> {
        check_segment("filename", filename)?;
        let tx = self.store.read()?;
        store::get(&tx.open_table(IMAGES)?, &store::key(&[id, filename]))?
            .ok_or_else(|| not_found("no such image"))
    }

    /// The image behind an avatar URL: `{character id}_{image file name}`.
    pub fn avatar(&self, name: &str) -> Result<Image> {
        check_segment("filename", name)?;
        match name.split_at_checked(36) {
            Some((id, rest)) if is_id(id) && rest.starts_with('_') => self.image(id, &rest[1..]),
            _ => Err(not_found("no such avatar")),
        }
    }

    /// Deletes an image and its clips; the next image (by name) becomes active if it was.
    pub fn delete_image(&self, id: &str, filename: &str) -> Result<()> {
        check_segment("filename", filename)?;
        let tx = self.store.write()?;
        let mut dropped = Vec::new();
        {
            let mut images = tx.open_table(IMAGES)?;
            let image: Image = store::get(&images, &store::key(&[id, filename]))?
                .ok_or_else(|| not_found("no such image"))?;
            images.remove(store::key(&[id, filename]).as_str())?;
            dropped.push(image.blob);
            let mut chars = tx.open_table(CHARACTERS)?;
            // The image was found under this id, so the id is one the engine issued.
            let mut c = load(&chars, &CharacterId::of_record(id))?;
            if c.active_image == filename {
                // The one after it by name, wrapping round to the first.
                let rest: Vec<Image> = store::scan(&images, id)?;
                let next = rest.iter().find(|i| i.filename.as_str() > filename);
                c.active_image = next
                    .or(rest.first())
                    .map(|i| i.filename.clone())
                    .unwrap_or_default();
            }
            c.updated_at = store::now();
            chars.insert(id, store::to_json(&c).as_slice())?;
        }
        dropped.extend(remove_clips(&tx, id, image_base(filename))?);
        for b in &dropped {
            blobs::unregister(&tx, b)?;
        }
        tx.commit()?;
        self.store.blobs().remove_all(&dropped);
        self.characters.invalidate();
        Ok(())
    }

    pub fn activate_image(&self, id: &str, filename: &str) -> Result<Activation> {
        check_segment("filename", filename)?;
        let tx = self.store.write()?;
        {
            let images = tx.open_table(IMAGES)?;
            if images.get(store::key(&[id, filename]).as_str())?.is_none() {
                return Err(not_found("no such image"));
            }
            let mut chars = tx.open_table(CHARACTERS)?;
            // The image was found under this id, so the id is one the engine issued.
            let id = &CharacterId::of_record(id);
            let mut c = load(&chars, id)?;
            c.active_image = filename.to_string();
            c.updated_at = store::now();
            chars.insert(id.as_str(), store::to_json(&c).as_slice())?;
        }
        tx.commit()?;
        self.characters.invalidate();
        let v = self.character(&CharacterId::of_record(id))?;
        Ok(Activation {
            active_image: v.active_image,
            avatar_image: v.avatar_image,
            idle_video_url: v.idle_video_url,
            idle_video_urls: v.idle_video_urls,
        })
    }

    /// Stores an idle clip for one of the character's images, replacing a clip of that name. A
    /// clip that flashes (`media::flash`, WCAG 2.3.1) is refused, naming the second.
    pub fn put_clip(
        &self,
        id: &str,
        imgbase: &str,
        variant: &str,
        filename: &str,
        bytes: &[u8],
    ) -> Result<Clip> {
        check_segment("imgbase", imgbase)?;
        check_segment("filename", filename)?;
        if !variant.is_empty() {
            check_segment("variant", variant)?;
            if !is_variant(variant) {
                return Err(bad(
                    "variant must be idle, listening, speaking or WIDTHxHEIGHT",
                ));
            }
        }
        if !media::is_h264_mp4(bytes) {
            return Err(Error::UnsupportedMedia(
                "idle clip must be an MP4 file with an H.264 video track".into(),
            ));
        }
        let blob = self.store.blobs().put(bytes, "video/mp4")?;
        // Checked from the stored file, so that the upload is not held in memory twice.
        let flashes = match self.store.blobs().open_file(&blob) {
            Ok(file) => media::flash::check_file(file).map_err(|r| bad(r.to_string())),
            Err(e) => Err(e.into()),
        };
        if let Err(e) = flashes {
            self.store.blobs().remove_all(&[blob]);
            return Err(e);
        }
        let clip = Clip {
            imgbase: imgbase.into(),
            variant: variant.into(),
            filename: filename.into(),
            added_at: store::now(),
            blob: blob.clone(),
        };
        let stored = (|| {
            let tx = self.store.write()?;
            load(&tx.open_table(CHARACTERS)?, &CharacterId::parse(id)?)?;
            let images: Vec<Image> = store::scan(&tx.open_table(IMAGES)?, id)?;
            if !images.iter().any(|i| image_base(&i.filename) == imgbase) {
                return Err(not_found(format!("the character has no image {imgbase}")));
            }
            let old = tx
                .open_table(CLIPS)?
                .insert(
                    clip_key(id, imgbase, variant, filename).as_str(),
                    store::to_json(&clip).as_slice(),
                )?
                .map(|o| store::from_json::<Clip>(o.value()))
                .transpose()?;
            if let Some(old) = &old {
                blobs::unregister(&tx, &old.blob)?;
            }
            blobs::register(&tx, &blob)?;
            tx.commit()?;
            Ok(old)
        })();
        let (keep, drop_now) = match stored {
            Ok(old) => (Ok(clip), old.map(|o| o.blob)),
            Err(e) => (Err(e), Some(blob)),
        };
        self.store.blobs().remove_all(drop_now.as_slice());
        self.characters.invalidate();
        keep
    }

    pub fn clip(&self, id: &str, imgbase: &str, variant: &str, filename: &str) -> Result<Clip> {
        for (what, s) in [("imgbase", imgbase), ("filename", filename)] {
            check_segment(what, s)?;
        }
        if !variant.is_empty() {
            check_segment("variant", variant)?;
        }
        let tx = self.store.read()?;
        store::get(
            &tx.open_table(CLIPS)?,
            &clip_key(id, imgbase, variant, filename),
        )?
        .ok_or_else(|| not_found("no such clip"))
    }

    /// All clips of the character's active image (for the display).
    pub fn active_clips(&self, id: &CharacterId) -> Result<Vec<Clip>> {
        let tx = self.store.read()?;
        let c = load(&tx.open_table(CHARACTERS)?, id)?;
        clips_of(&tx.open_table(CLIPS)?, id, image_base(&c.active_image))
    }

    pub fn delete_clip(
        &self,
        id: &str,
        imgbase: &str,
        variant: &str,
        filename: &str,
    ) -> Result<()> {
        let clip = self.clip(id, imgbase, variant, filename)?;
        let tx = self.store.write()?;
        let removed = tx
            .open_table(CLIPS)?
            .remove(clip_key(id, imgbase, variant, filename).as_str())?
            .is_some();
        if !removed {
            return Err(not_found("no such clip"));
        }
        blobs::unregister(&tx, &clip.blob)?;
        tx.commit()?;
        self.store.blobs().remove_all(&[clip.blob]);
        self.characters.invalidate();
        Ok(())
    }
}

fn is_variant(v: &str) -> bool {
    CLIP_STATES.contains(&v)
        || v.split_once('x').is_some_and(|(w, h)| {
            [w, h]
                .iter()
                .all(|n| !n.is_empty() && n.len() <= 5 && n.bytes().all(|b| b.is_ascii_digit()))
        })
}

fn insert_character(tx: &WriteTransaction, input: CharacterInput) -> Result<Character> {
    let now = store::now();
    let mut c = Character {
        id: CharacterId::new().into(),
        name: String::new(),
        description: String::new(),
        use_face_crop: false,
        mode: String::new(),
        voice_provider: String::new(),
        voice_type: String::new(),
        components: Components::default(),
        speaking_style: String::new(),
        personality: String::new(),
        welcome_message: String::new(),
        system_prompt: String::new(),
        tags: Vec::new(),
        voices: Default::default(),
        recordings: Vec::new(),
        image_mode: String::new(),
        active_image: String::new(),
        next_image: 0,
        on_screen: Vec::new(),
        created_at: now.clone(),
        updated_at: now,
    };
    input.apply(&mut c);
    tx.open_table(CHARACTERS)?
        .insert(c.id.as_str(), store::to_json(&c).as_slice())?;
    Ok(c)
}

fn load(
    table: &impl ReadableTable<&'static str, &'static [u8]>,
    id: &CharacterId,
) -> Result<Character> {
    store::get(table, id)?.ok_or_else(|| not_found("no such character"))
}

fn clips_of(
    table: &impl ReadableTable<&'static str, &'static [u8]>,
    id: &str,
    imgbase: &str,
) -> Result<Vec<Clip>> {
    if imgbase.is_empty() {
        return Ok(Vec::new());
    }
    Ok(store::scan(table, &store::key(&[id, imgbase]))?)
}

fn remove_clips(tx: &WriteTransaction, id: &str, imgbase: &str) -> Result<Vec<BlobRef>> {
    let mut table = tx.open_table(CLIPS)?;
    let (lo, hi) = store::prefix_bounds(&store::key(&[id, imgbase]));
    let mut out = Vec::new();
    for item in table.extract_from_if(lo.as_str()..hi.as_str(), |_, _| true)? {
        let (_, v) = item?;
        out.push(store::from_json::<Clip>(v.value())?.blob);
    }
    Ok(out)
}

fn view(tx: &redb::ReadTransaction, c: Character) -> Result<CharacterView> {
    let images: Vec<Image> = store::scan(&tx.open_table(IMAGES)?, &c.id)?;
    let mut clips = clips_of(&tx.open_table(CLIPS)?, &c.id, image_base(&c.active_image))?;
    // The `idle` state clip first, then the clip without variant, then the rest.
    clips.sort_by_key(|k| (k.variant != "idle", !k.variant.is_empty()));
    let idle_video_urls: Vec<String> = clips.iter().map(|k| clip_url(&c.id, k)).collect();
    Ok(CharacterView {
        not_on_this_kiosk: foreign_fields(&c),
        avatar_image: if c.active_image.is_empty() {
            String::new()
        } else {
            format!("/api/v1/avatars/{}_{}", c.id, c.active_image)
        },
        images: images
            .into_iter()
            .map(|i| ImageView {
                filename: i.filename,
                orig_name: i.orig_name,
                added_at: i.added_at,
                url: None,
            })
            .collect(),
        idle_video_url: idle_video_urls.first().cloned().unwrap_or_default(),
        idle_video_urls,
        id: c.id,
        name: c.name,
        description: c.description,
        use_face_crop: c.use_face_crop,
        mode: c.mode,
        voice_provider: c.voice_provider,
        voice_type: c.voice_type,
        components: c.components,
        speaking_style: c.speaking_style,
        personality: c.personality,
        welcome_message: c.welcome_message,
        system_prompt: c.system_prompt,
        tags: c.tags,
        voices: c
            .voices
            .into_iter()
            .filter_map(|(l, v)| Some((Language::parse(&l)?, v)))
            .collect(),
        active_image: c.active_image,
        image_mode: c.image_mode,
        created_at: c.created_at,
        updated_at: c.updated_at,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants_are_states_or_resolutions() {
        for ok in ["idle", "listening", "speaking", "800x480", "1920x1080"] {
            assert!(is_variant(ok), "{ok}");
        }
        for no in ["Idle", "x480", "800x", "800x480x1", "big", "123456x1"] {
            assert!(!is_variant(no), "{no}");
        }
    }

    #[test]
    fn input_rules() {
        let ok = |j: &str| {
            serde_json::from_str::<CharacterInput>(j)
                .unwrap()
                .validate()
        };
        assert!(ok(r#"{"name":"  "}"#).is_err());
        assert!(ok(&format!(r#"{{"name":"{}"}}"#, "a".repeat(101))).is_err());
        assert_eq!(
            ok(r#"{"name":" A ","mode":"voice_llm"}"#).unwrap().mode,
            "omni"
        );
        assert_eq!(ok(r#"{"name":" A "}"#).unwrap().name, "A");
        assert!(ok(r#"{"name":"A","mode":"chat"}"#).is_err());
        assert!(ok(r#"{"name":"A","voice_provider":"acme"}"#).is_err());
        assert!(ok(r#"{"name":"A","images":[1],"active_image":"x"}"#).is_ok());
    }
}
