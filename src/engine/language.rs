//! Languages: the museum's languages (settings `kiosk.languages`, the first the default), the
//! language of a visit, and the kiosk's own lines in each. A language is a tag such as `en`,
//! `de` or `pt-BR`; the kiosk's lines are built in for English, German, French, Spanish and
//! Italian, and any other language speaks them in the default language's words until it has its
//! own (docs/languages.md).

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A language tag: a primary subtag of 2-3 letters (lower case), then subtags of 2-8 letters or
/// digits (a region upper case), e.g. `en`, `es`, `zh-CN`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Language(String);

impl Language {
    /// Parses a tag, normalising its case (`PT-br` is `pt-BR`); `None` for anything else.
    pub fn parse(tag: &str) -> Option<Language> {
        let mut parts = tag.trim().split(['-', '_']);
        let primary = parts.next()?;
        if !(2..=3).contains(&primary.len()) || !primary.chars().all(|c| c.is_ascii_alphabetic()) {
            return None;
        }
        let mut out = primary.to_ascii_lowercase();
        for sub in parts {
            if !(2..=8).contains(&sub.len()) || !sub.chars().all(|c| c.is_ascii_alphanumeric()) {
                return None;
            }
            out.push('-');
            if sub.len() == 2 {
                out.push_str(&sub.to_ascii_uppercase());
            } else {
                out.push_str(&sub.to_ascii_lowercase());
            }
        }
        Some(Language(out))
    }

    pub fn english() -> Language {
        Language("en".into())
    }

    pub fn tag(&self) -> &str {
        &self.0
    }

    /// The primary subtag: `es` of `es-MX`; what recognisers and espeak-ng are asked for.
    pub fn primary(&self) -> &str {
        self.0.split('-').next().unwrap_or(&self.0)
    }

    /// Whether `other` is the same language, region aside (`en` and `en-GB`).
    pub fn same_as(&self, other: &Language) -> bool {
        self.primary() == other.primary()
    }

    /// The language's name in itself, as a visitor looks for it on the screen ("Deutsch").
    pub fn own_name(&self) -> String {
        KNOWN
            .iter()
            .find(|k| k.tag == self.primary())
            .map_or_else(|| self.0.clone(), |k| k.own.to_string())
    }

    /// The language's English name, as a language model is told to answer in it.
    pub fn english_name(&self) -> String {
        KNOWN
            .iter()
            .find(|k| k.tag == self.primary())
            .map_or_else(|| self.0.clone(), |k| k.english.to_string())
    }

    /// The language a recogniser reported: a tag (`es`, Wyoming and most servers) or an English
    /// name (`spanish`, OpenAI's `verbose_json`).
    pub fn from_recogniser(reported: &str) -> Option<Language> {
        let reported = reported.trim();
        KNOWN
            .iter()
            .find(|k| k.english.eq_ignore_ascii_case(reported))
            .map(|k| Language(k.tag.into()))
            .or_else(|| Language::parse(reported))
    }

    /// The kiosk's built-in line `phrase` in this language, else in `fallback`'s, else in
    /// English.
    pub fn say(&self, phrase: Phrase, fallback: &Language) -> String {
        self.built_in(phrase)
            .or_else(|| fallback.built_in(phrase))
            .unwrap_or(LINES[0].line(phrase))
            .to_string()
    }

    fn built_in(&self, phrase: Phrase) -> Option<&'static str> {
        LINES
            .iter()
            .find(|t| t.tag == self.primary())
            .map(|t| t.line(phrase))
    }

    /// Whether the kiosk has its own lines in this language (not the default's).
    pub fn has_lines(&self) -> bool {
        LINES.iter().any(|t| t.tag == self.primary())
    }
}

impl Default for Language {
    fn default() -> Self {
        Language::english()
    }
}

impl fmt::Display for Language {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for Language {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Language {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let tag = String::deserialize(d)?;
        Language::parse(&tag).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "{tag:?} is not a language tag such as en, es or pt-BR"
            ))
        })
    }
}

/// Names of the languages a museum is likely to offer: its own (for the visitor) and the English
/// one (for a language model, and as OpenAI's recogniser reports it).
struct Known {
    tag: &'static str,
    own: &'static str,
    english: &'static str,
}

#[rustfmt::skip]
const KNOWN: &[Known] = &[
    Known { tag: "en", own: "English", english: "English" },
    Known { tag: "de", own: "Deutsch", english: "German" },
    Known { tag: "fr", own: "Français", english: "French" },
    Known { tag: "es", own: "Español", english: "Spanish" },
    Known { tag: "it", own: "Italiano", english: "Italian" },
    Known { tag: "nl", own: "Nederlands", english: "Dutch" },
    Known { tag: "pt", own: "Português", english: "Portuguese" },
    Known { tag: "pl", own: "Polski", english: "Polish" },
    Known { tag: "cs", own: "Čeština", english: "Czech" },
    Known { tag: "da", own: "Dansk", english: "Danish" },
    Known { tag: "sv", own: "Svenska", english: "Swedish" },
    Known { tag: "no", own: "Norsk", english: "Norwegian" },
    Known { tag: "nb", own: "Norsk bokmål", english: "Norwegian Bokmål" },
    Known { tag: "fi", own: "Suomi", english: "Finnish" },
    Known { tag: "el", own: "Ελληνικά", english: "Greek" },
    Known { tag: "ru", own: "Русский", english: "Russian" },
    Known { tag: "uk", own: "Українська", english: "Ukrainian" },
    Known { tag: "bg", own: "Български", english: "Bulgarian" },
    Known { tag: "hu", own: "Magyar", english: "Hungarian" },
    Known { tag: "ro", own: "Română", english: "Romanian" },
    Known { tag: "tr", own: "Türkçe", english: "Turkish" },
    Known { tag: "ca", own: "Català", english: "Catalan" },
    Known { tag: "ar", own: "العربية", english: "Arabic" },
    Known { tag: "he", own: "עברית", english: "Hebrew" },
    Known { tag: "zh", own: "中文", english: "Chinese" },
    Known { tag: "ja", own: "日本語", english: "Japanese" },
    Known { tag: "ko", own: "한국어", english: "Korean" },
];

/// Staff's wording of the kiosk's lines, per language (settings `kiosk.lines`), over the
/// built-in lines.
pub type Wording = BTreeMap<Language, BTreeMap<Phrase, String>>;

/// The kiosk's line `phrase` in `language`: staff's wording in it, else the built-in line in
/// it, else staff's wording in the `default` language, else the built-in line there, else
/// English.
pub fn line(wording: &Wording, language: &Language, phrase: Phrase, default: &Language) -> String {
    let own = |l: &Language| {
        wording
            .get(l)
            .or_else(|| wording.iter().find(|(t, _)| t.same_as(l)).map(|(_, w)| w))
            .and_then(|w| w.get(&phrase))
            .cloned()
    };
    own(language)
        .or_else(|| language.built_in(phrase).map(str::to_string))
        .or_else(|| own(default))
        .unwrap_or_else(|| default.say(phrase, &Language::english()))
}

/// The most characters of a line staff write.
pub const LINE_MAX_CHARS: usize = 300;

/// Checks staff's wording: every line short, not blank, with the placeholders it needs.
pub fn check_wording(wording: &Wording) -> Result<(), String> {
    for (language, lines) in wording {
        for (phrase, text) in lines {
            let name = format!("kiosk.lines.{language}.{}", phrase.name());
            if text.trim().is_empty() || text.chars().count() > LINE_MAX_CHARS {
                return Err(format!("{name} must be 1 to {LINE_MAX_CHARS} characters"));
            }
            for hole in phrase.placeholders() {
                if !text.contains(hole) {
                    return Err(format!("{name} must contain {hole}"));
                }
            }
        }
    }
    Ok(())
}

/// The kiosk's own lines: what it says and shows besides the character's answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phrase {
    /// Nothing was recognised in the visitor's speech.
    NotHeard,
    /// A turn failed.
    Apology,
    /// The offline engine's knowledge has nothing on the question; `{name}` is the character's.
    DontKnow,
    /// The welcome when the character has none of its own in the language.
    Greeting,
    /// The offline recogniser hears English only, and the visitor chose another language.
    HearsEnglishOnly,
    Listening,
    Thinking,
    Speaking,
    /// Before the question the kiosk heard (or the visitor chose).
    YouAsked,
    HoldToTalk,
    TouchToChoose,
    HoldToAskMore,
    HoldOrTouchToAskMore,
    /// The question screen's title; `{page}` and `{pages}`.
    ChooseQuestion,
    Previous,
    Close,
    Next,
    /// The question screen's row that opens the list of languages.
    Languages,
    /// The question screen's last row during a visit: its transcript is deleted at once.
    ForgetVisit,
    /// Written once the visit is forgotten.
    VisitForgotten,
}

impl Phrase {
    pub const ALL: [Phrase; 20] = [
        Phrase::NotHeard,
        Phrase::Apology,
        Phrase::DontKnow,
        Phrase::Greeting,
        Phrase::HearsEnglishOnly,
        Phrase::Listening,
        Phrase::Thinking,
        Phrase::Speaking,
        Phrase::YouAsked,
        Phrase::HoldToTalk,
        Phrase::TouchToChoose,
        Phrase::HoldToAskMore,
        Phrase::HoldOrTouchToAskMore,
        Phrase::ChooseQuestion,
        Phrase::Previous,
        Phrase::Close,
        Phrase::Next,
        Phrase::Languages,
        Phrase::ForgetVisit,
        Phrase::VisitForgotten,
    ];

    /// Its name in the settings (`not_heard`).
    pub fn name(self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    }

    /// What a line of this phrase must contain: the character's name, the page numbers.
    pub fn placeholders(self) -> &'static [&'static str] {
        match self {
            Phrase::DontKnow | Phrase::Greeting => &["{name}"],
            Phrase::ChooseQuestion => &["{page}", "{pages}"],
            _ => &[],
        }
    }
}

/// Every line of the kiosk in one language, resolved (staff's wording or the built-in), so a
/// screen draws them without reading the settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Words(Vec<String>);

impl Words {
    pub fn new(line: impl Fn(Phrase) -> String) -> Words {
        Words(Phrase::ALL.into_iter().map(line).collect())
    }

    pub fn get(&self, phrase: Phrase) -> &str {
        &self.0[phrase as usize]
    }
}

impl Default for Words {
    /// The built-in English lines.
    fn default() -> Self {
        Words::new(|p| LINES[0].line(p).to_string())
    }
}

/// One language's lines, in the order of `Phrase`.
struct Table {
    tag: &'static str,
    lines: [&'static str; 20],
}

impl Table {
    fn line(&self, p: Phrase) -> &'static str {
        self.lines[p as usize]
    }
}

/// The kiosk's lines in the languages it knows; English first (the last resort).
const LINES: &[Table] = &[
    Table {
        tag: "en",
        lines: [
            "Sorry, I didn't catch that. Could you say it again?",
            "I'm sorry, I can't answer that right now. Please try again in a moment.",
            "I'm sorry, I don't know about that. I'm {name}; ask me about the exhibition and what I know of it.",
            "Hello! I'm {name}. What would you like to know?",
            "I can understand spoken questions in English only. Please touch the screen to choose a question.",
            "Listening…",
            "Thinking…",
            "Speaking…",
            "You asked:",
            "Hold the button to talk",
            "or touch the screen to choose a question",
            "Hold the button to ask more",
            "Hold the button or touch the screen to ask more",
            "Choose a question ({page} of {pages})",
            "‹ Previous",
            "Close",
            "Next ›",
            "Languages",
            "Forget my visit",
            "Your visit is forgotten: nothing of it is kept.",
        ],
    },
    Table {
        tag: "de",
        lines: [
            "Entschuldigung, das habe ich nicht verstanden. Können Sie es noch einmal sagen?",
            "Das kann ich gerade leider nicht beantworten. Bitte versuchen Sie es gleich noch einmal.",
            "Das weiß ich leider nicht. Ich bin {name}; fragen Sie mich nach der Ausstellung und dem, was ich darüber weiß.",
            "Hallo! Ich bin {name}. Was möchten Sie wissen?",
            "Gesprochene Fragen verstehe ich nur auf Englisch. Bitte tippen Sie auf den Bildschirm, um eine Frage zu wählen.",
            "Ich höre zu…",
            "Ich denke nach…",
            "Ich spreche…",
            "Ihre Frage:",
            "Zum Sprechen den Knopf gedrückt halten",
            "oder auf den Bildschirm tippen, um eine Frage zu wählen",
            "Für weitere Fragen den Knopf gedrückt halten",
            "Für weitere Fragen den Knopf halten oder den Bildschirm berühren",
            "Wählen Sie eine Frage ({page} von {pages})",
            "‹ Zurück",
            "Schließen",
            "Weiter ›",
            "Sprachen",
            "Meinen Besuch vergessen",
            "Ihr Besuch ist vergessen: nichts davon wird gespeichert.",
        ],
    },
    Table {
        tag: "fr",
        lines: [
            "Pardon, je n'ai pas compris. Pouvez-vous répéter ?",
            "Désolé, je ne peux pas répondre pour le moment. Veuillez réessayer dans un instant.",
            "Désolé, je ne sais pas. Je suis {name} ; interrogez-moi sur l'exposition et sur ce que j'en sais.",
            "Bonjour ! Je suis {name}. Que voulez-vous savoir ?",
            "Je ne comprends les questions parlées qu'en anglais. Touchez l'écran pour choisir une question.",
            "J'écoute…",
            "Je réfléchis…",
            "Je parle…",
            "Votre question :",
            "Maintenez le bouton pour parler",
            "ou touchez l'écran pour choisir une question",
            "Maintenez le bouton pour une autre question",
            "Maintenez le bouton ou touchez l'écran pour une autre question",
            "Choisissez une question ({page} sur {pages})",
            "‹ Précédent",
            "Fermer",
            "Suivant ›",
            "Langues",
            "Oublier ma visite",
            "Votre visite est oubliée : rien n'en est conservé.",
        ],
    },
    Table {
        tag: "es",
        lines: [
            "Perdona, no te he entendido. ¿Puedes repetirlo?",
            "Lo siento, ahora no puedo responder. Inténtalo de nuevo en un momento.",
            "Lo siento, no lo sé. Soy {name}; pregúntame por la exposición y lo que sé de ella.",
            "¡Hola! Soy {name}. ¿Qué te gustaría saber?",
            "Solo entiendo preguntas habladas en inglés. Toca la pantalla para elegir una pregunta.",
            "Escuchando…",
            "Pensando…",
            "Hablando…",
            "Has preguntado:",
            "Mantén pulsado el botón para hablar",
            "o toca la pantalla para elegir una pregunta",
            "Mantén pulsado el botón para preguntar más",
            "Mantén pulsado el botón o toca la pantalla para preguntar más",
            "Elige una pregunta ({page} de {pages})",
            "‹ Anterior",
            "Cerrar",
            "Siguiente ›",
            "Idiomas",
            "Olvidar mi visita",
            "Tu visita se ha olvidado: no se guarda nada de ella.",
        ],
    },
    Table {
        tag: "it",
        lines: [
            "Scusa, non ho capito. Puoi ripetere?",
            "Mi dispiace, ora non posso rispondere. Riprova tra un momento.",
            "Mi dispiace, non lo so. Sono {name}; chiedimi della mostra e di ciò che ne so.",
            "Ciao! Sono {name}. Che cosa vorresti sapere?",
            "Capisco le domande parlate solo in inglese. Tocca lo schermo per scegliere una domanda.",
            "Ascolto…",
            "Sto pensando…",
            "Sto parlando…",
            "Hai chiesto:",
            "Tieni premuto il pulsante per parlare",
            "o tocca lo schermo per scegliere una domanda",
            "Tieni premuto il pulsante per chiedere altro",
            "Tieni premuto il pulsante o tocca lo schermo per chiedere altro",
            "Scegli una domanda ({page} di {pages})",
            "‹ Indietro",
            "Chiudi",
            "Avanti ›",
            "Lingue",
            "Dimentica la mia visita",
            "La tua visita è dimenticata: non ne resta nulla.",
        ],
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_checked_and_normalised() {
        assert_eq!(Language::parse("PT_br").unwrap().tag(), "pt-BR");
        assert_eq!(Language::parse("zh-Hant-TW").unwrap().tag(), "zh-hant-TW");
        assert_eq!(Language::parse("es-MX").unwrap().primary(), "es");
        for bad in ["", "e", "english", "en-", "../en", "en/us", "es-x"] {
            assert_eq!(Language::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_recogniser_may_name_the_language_in_english_or_by_its_tag() {
        let es = Language::parse("es").unwrap();
        assert_eq!(Language::from_recogniser("spanish"), Some(es.clone()));
        assert_eq!(Language::from_recogniser("Spanish"), Some(es.clone()));
        assert_eq!(Language::from_recogniser("es"), Some(es));
        assert_eq!(Language::from_recogniser("klingonese"), None);
    }

    #[test]
    fn every_language_has_every_line_and_the_placeholders_they_need() {
        for table in LINES {
            for (i, line) in table.lines.iter().enumerate() {
                assert!(!line.trim().is_empty(), "{} line {i}", table.tag);
            }
            let l = Language::parse(table.tag).unwrap();
            let en = Language::english();
            // Every phrase once, in the order of the table's lines.
            assert_eq!(Phrase::ALL.len(), table.lines.len());
            for (i, phrase) in Phrase::ALL.into_iter().enumerate() {
                assert_eq!(phrase as usize, i);
                let line = l.say(phrase, &en);
                for hole in phrase.placeholders() {
                    assert!(line.contains(hole), "{}: {line}", table.tag);
                }
            }
        }
        // A language without lines of its own speaks the default's.
        let de = Language::parse("de").unwrap();
        let nl = Language::parse("nl").unwrap();
        assert_eq!(nl.say(Phrase::Close, &de), "Schließen");
        assert_eq!(nl.own_name(), "Nederlands");
        assert!(!nl.has_lines());
    }

    #[test]
    fn staffs_wording_comes_first_then_the_built_in_lines_then_the_default() {
        let (de, nl, en) = (
            Language::parse("de").unwrap(),
            Language::parse("nl").unwrap(),
            Language::english(),
        );
        let wording: Wording = serde_json::from_value(serde_json::json!({
            "de": {"hold_to_talk": "Knopf halten und sprechen"},
            "nl": {"close": "Sluiten"},
        }))
        .unwrap();
        assert_eq!(
            line(&wording, &de, Phrase::HoldToTalk, &en),
            "Knopf halten und sprechen"
        );
        assert_eq!(line(&wording, &de, Phrase::Close, &en), "Schließen");
        assert_eq!(line(&wording, &nl, Phrase::Close, &en), "Sluiten");
        assert_eq!(line(&wording, &nl, Phrase::Next, &de), "Weiter ›");
        assert_eq!(
            Phrase::HoldOrTouchToAskMore.name(),
            "hold_or_touch_to_ask_more"
        );
        assert!(check_wording(&wording).is_ok());
        let missing: Wording =
            serde_json::from_value(serde_json::json!({"es": {"greeting": "¡Hola!"}})).unwrap();
        let err = check_wording(&missing).unwrap_err();
        assert!(
            err.contains("kiosk.lines.es.greeting must contain {name}"),
            "{err}"
        );
        let unknown =
            serde_json::from_value::<Wording>(serde_json::json!({"es": {"shout": "¡Eh!"}}));
        assert!(unknown.is_err());
    }
}
