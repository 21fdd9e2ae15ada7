//! Readers for the three evaluation datasets (formats in ../shared/data/README.md).

use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use anyhow::{Context, Result, bail};
use chrono::{DateTime, NaiveDateTime, Utc};
use serde::Deserialize;
use serde_json::Value;

/// Opens a file, transparently gunzipping `*.gz`.
fn reader(path: &Path) -> Result<Box<dyn BufRead>> {
    let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let read: Box<dyn Read> = if path.extension().is_some_and(|e| e == "gz") {
        Box::new(flate2::read::GzDecoder::new(file))
    } else {
        Box::new(file)
    };
    Ok(Box::new(BufReader::new(read)))
}

/// Reads a JSON-lines file.
pub fn json_lines<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Vec<T>> {
    let mut out = Vec::new();
    for (n, line) in reader(path)?.lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        out.push(
            serde_json::from_str(&line)
                .with_context(|| format!("{} line {}", path.display(), n + 1))?,
        );
    }
    Ok(out)
}

// ---- LoCoMo ----

/// One LoCoMo conversation with its questions.
#[derive(Clone, Debug)]
pub struct Conversation {
    pub sample_id: String,
    pub speakers: [String; 2],
    pub sessions: Vec<Session>,
    pub questions: Vec<Question>,
    /// The facts each session established about each speaker (LoCoMo's `observation`):
    /// `(session number, speaker, fact)`.
    pub facts: Vec<(usize, String, String)>,
}

/// One session: its date and turns.
#[derive(Clone, Debug)]
pub struct Session {
    pub number: usize,
    pub date_text: String,
    pub date: Option<DateTime<Utc>>,
    pub turns: Vec<Turn>,
}

/// One dialog turn.
#[derive(Clone, Debug)]
pub struct Turn {
    pub dia_id: String,
    pub speaker: String,
    pub text: String,
    /// The caption of a shared photo, if any (LoCoMo's `blip_caption`).
    pub caption: Option<String>,
}

impl Turn {
    /// What was said, with a shared photo described in brackets.
    pub fn content(&self) -> String {
        match &self.caption {
            Some(c) => format!("{} [shares a photo: {c}]", self.text),
            None => self.text.clone(),
        }
    }
}

/// One QA pair.
#[derive(Clone, Debug)]
pub struct Question {
    pub question: String,
    /// The answer (for category 5, the adversarial answer is not the truth: the conversation
    /// does not say; the expected answer is that it was not mentioned).
    pub answer: String,
    pub evidence: Vec<String>,
    pub category: u8,
}

impl Question {
    /// The evidence dialog ids, cleaned and sorted (`"D8:6; D9:17"` happens in the data).
    pub fn evidence_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .evidence
            .iter()
            .flat_map(|e| e.split([';', ',', ' ']))
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .map(str::to_owned)
            .collect();
        ids.sort();
        ids.dedup();
        ids
    }
}

/// LoCoMo category names (the numbering of the released data).
pub fn category_name(category: u8) -> &'static str {
    match category {
        1 => "multi-hop",
        2 => "temporal",
        3 => "open-domain",
        4 => "single-hop",
        5 => "adversarial",
        _ => "other",
    }
}

/// Parses LoCoMo's session dates, e.g. `1:56 pm on 8 May, 2023`.
pub fn parse_locomo_date(text: &str) -> Option<DateTime<Utc>> {
    let upper = text
        .trim()
        .replace("am on", "AM on")
        .replace("pm on", "PM on");
    NaiveDateTime::parse_from_str(&upper, "%I:%M %p on %d %B, %Y")
        .ok()
        .map(|d| d.and_utc())
}

/// Reads a LoCoMo-format file.
pub fn locomo(path: &Path) -> Result<Vec<Conversation>> {
    let value: Value = serde_json::from_reader(reader(path)?)
        .with_context(|| format!("{} is not JSON", path.display()))?;
    let Value::Array(samples) = value else {
        bail!("{}: expected a JSON array of conversations", path.display());
    };
    samples.iter().map(conversation).collect()
}

fn conversation(sample: &Value) -> Result<Conversation> {
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    let c = &sample["conversation"];
    let sample_id = text(&sample["sample_id"]);
    let speakers = [text(&c["speaker_a"]), text(&c["speaker_b"])];
    let mut sessions = Vec::new();
    for number in 1.. {
        let Some(Value::Array(turns)) = c.get(format!("session_{number}")) else {
            // Some conversations skip numbers; stop after a gap of several.
            if number > sessions.last().map_or(0, |s: &Session| s.number) + 5 {
                break;
            }
            continue;
        };
        let date_text = text(&c[format!("session_{number}_date_time")]);
        let turns = turns
            .iter()
            .map(|t| Turn {
                dia_id: text(&t["dia_id"]),
                speaker: text(&t["speaker"]),
                text: text(&t["text"]),
                caption: t
                    .get("blip_caption")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            })
            .collect();
        sessions.push(Session {
            number,
            date: parse_locomo_date(&date_text),
            date_text,
            turns,
        });
    }
    if sessions.is_empty() {
        bail!("conversation {sample_id} has no sessions");
    }
    let questions = sample["qa"]
        .as_array()
        .map(|qa| {
            qa.iter()
                .map(|q| Question {
                    question: text(&q["question"]),
                    answer: match q.get("answer") {
                        Some(a) if !a.is_null() => text(a),
                        _ => "Not mentioned in the conversation".to_owned(),
                    },
                    evidence: q["evidence"]
                        .as_array()
                        .map(|e| {
                            e.iter()
                                .filter_map(Value::as_str)
                                .map(str::to_owned)
                                .collect()
                        })
                        .unwrap_or_default(),
                    category: q["category"].as_u64().unwrap_or(0) as u8,
                })
                .collect()
        })
        .unwrap_or_default();
    let mut facts = Vec::new();
    if let Some(Value::Object(observations)) = sample.get("observation") {
        for (key, session) in observations {
            let number = key
                .trim_start_matches("session_")
                .trim_end_matches("_observation")
                .parse()
                .unwrap_or(0);
            let Value::Object(by_speaker) = session else {
                continue;
            };
            for (speaker, items) in by_speaker {
                for item in items.as_array().into_iter().flatten() {
                    let fact = match item {
                        Value::Array(parts) => parts.first().and_then(Value::as_str),
                        other => other.as_str(),
                    };
                    if let Some(fact) = fact {
                        facts.push((number, speaker.clone(), fact.to_owned()));
                    }
                }
            }
        }
    }
    Ok(Conversation {
        sample_id,
        speakers,
        sessions,
        questions,
        facts,
    })
}

// ---- Nested KV ----

/// One example of `kv-retrieval-140_keys.jsonl.gz`.
#[derive(Clone, Debug, Deserialize)]
pub struct KvExample {
    pub ordered_kv_records: Vec<(String, String)>,
}

// ---- NaturalQuestions-Open ----

/// One question of `nq-open-oracle.jsonl.gz`.
#[derive(Clone, Debug, Deserialize)]
pub struct NqQuestion {
    pub question: String,
    pub answers: Vec<String>,
    pub ctxs: Vec<NqPassage>,
}

/// A Wikipedia passage.
#[derive(Clone, Debug, Deserialize)]
pub struct NqPassage {
    #[serde(default)]
    pub title: String,
    pub text: String,
    #[serde(default)]
    pub isgold: bool,
}

impl NqQuestion {
    /// The gold passage (the first one marked gold, else the first).
    pub fn gold(&self) -> Option<&NqPassage> {
        self.ctxs.iter().find(|c| c.isgold).or(self.ctxs.first())
    }
}

impl NqPassage {
    /// The passage as stored: its title, then its text.
    pub fn document(&self) -> String {
        format!("{}\n{}", self.title, self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locomo_dates_parse() {
        let d = parse_locomo_date("1:56 pm on 8 May, 2023").unwrap();
        assert_eq!(d.to_rfc3339(), "2023-05-08T13:56:00+00:00");
        let d = parse_locomo_date("10:37 am on 27 June, 2023").unwrap();
        assert_eq!(d.to_rfc3339(), "2023-06-27T10:37:00+00:00");
        assert!(parse_locomo_date("someday").is_none());
    }

    #[test]
    fn evidence_ids_are_cleaned() {
        let q = Question {
            question: String::new(),
            answer: String::new(),
            evidence: vec![
                "D8:6; D9:17".to_owned(),
                "D1:3".to_owned(),
                "D1:3 ".to_owned(),
            ],
            category: 1,
        };
        assert_eq!(q.evidence_ids(), ["D1:3", "D8:6", "D9:17"]);
    }

    #[test]
    fn a_locomo_record_reads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.json");
        std::fs::write(
            &path,
            r#"[{"sample_id": "s", "conversation": {"speaker_a": "A", "speaker_b": "B",
                "session_1_date_time": "1:56 pm on 8 May, 2023",
                "session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "hi", "blip_caption": "a cat"}],
                "session_3_date_time": "2:00 pm on 9 May, 2023",
                "session_3": [{"speaker": "B", "dia_id": "D3:1", "text": "yo"}]},
              "qa": [{"question": "q?", "answer": 2022, "evidence": ["D1:1"], "category": 2},
                     {"question": "r?", "adversarial_answer": "x", "evidence": [], "category": 5}],
              "observation": {"session_1_observation": {"A": [["A likes cats.", "D1:1"]]}}}]"#,
        )
        .unwrap();
        let c = &locomo(&path).unwrap()[0];
        assert_eq!(c.speakers, ["A", "B"]);
        assert_eq!(c.sessions.len(), 2);
        assert_eq!(c.sessions[1].number, 3);
        assert_eq!(
            c.sessions[0].turns[0].content(),
            "hi [shares a photo: a cat]"
        );
        assert_eq!(c.questions[0].answer, "2022");
        assert_eq!(c.questions[1].answer, "Not mentioned in the conversation");
        assert_eq!(c.facts, [(1, "A".to_owned(), "A likes cats.".to_owned())]);
    }
}
