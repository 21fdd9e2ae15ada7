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

// ---- BEAM ----

/// One BEAM chat (github `mohammadtavakoli78/BEAM`, `chats/<size>/<n>/`): a user talking with
/// an assistant over several sessions, with probing questions whose evidence is message ids.
#[derive(Clone, Debug)]
pub struct BeamChat {
    /// `<size>/<n>`, e.g. `500K/3`.
    pub id: String,
    pub sessions: Vec<BeamSession>,
    pub questions: Vec<BeamQuestion>,
}

/// One batch of a BEAM chat: a session, dated by the time anchor of its first message.
#[derive(Clone, Debug)]
pub struct BeamSession {
    pub date: Option<DateTime<Utc>>,
    pub messages: Vec<BeamMessage>,
}

/// One message of a BEAM chat.
#[derive(Clone, Debug)]
pub struct BeamMessage {
    /// The message id (unique in its chat), as the questions' evidence names it.
    pub id: String,
    /// Whether the user (not the assistant) wrote it.
    pub from_user: bool,
    /// The text, without the generator's trailing index marker (`->-> 1,3`).
    pub content: String,
}

/// One probing question with evidence.
#[derive(Clone, Debug)]
pub struct BeamQuestion {
    /// Its type (`information_extraction`, `knowledge_update`...).
    pub kind: String,
    pub question: String,
    /// The evidence message ids (`source_chat_ids`, flattened).
    pub evidence: Vec<String>,
}

/// Parses BEAM's time anchors, e.g. `March-15-2024`.
pub fn parse_beam_date(text: &str) -> Option<DateTime<Utc>> {
    chrono::NaiveDate::parse_from_str(text.trim(), "%B-%d-%Y")
        .ok()
        .and_then(|d| d.and_hms_opt(9, 0, 0))
        .map(|d| d.and_utc())
}

/// A BEAM user message without the generator's index marker (`... ->-> 1,3`), which says
/// where in the plan the message came from and is not part of what the user wrote.
pub fn strip_beam_marker(content: &str) -> &str {
    match content.rfind("->->") {
        Some(at) => content[..at].trim_end(),
        None => content,
    }
}

/// Reads the BEAM chats under `dir`: either one chat folder (holding `chat.json` and
/// `probing_questions/probing_questions.json`) or a folder of them (`chats/500K`), in numeric
/// order. Chat folders without `chat.json` are skipped with a note (the snapshot lacks the
/// largest files). `abstention` questions have no evidence and are left out.
pub fn beam(dir: &Path) -> Result<Vec<BeamChat>> {
    if dir.join("chat.json").is_file() {
        return Ok(vec![beam_chat(dir)?]);
    }
    let mut folders: Vec<(u64, std::path::PathBuf)> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .filter_map(|e| {
            let n = e.file_name().to_str()?.parse().ok()?;
            Some((n, e.path()))
        })
        .collect();
    folders.sort();
    let mut chats = Vec::new();
    for (_, folder) in folders {
        if !folder.join("chat.json").is_file() {
            eprintln!("note: {} has no chat.json; skipped", folder.display());
            continue;
        }
        chats.push(beam_chat(&folder)?);
    }
    if chats.is_empty() {
        bail!(
            "{} holds no BEAM chat (folders <n>/ with chat.json, as in BEAM's chats/500K)",
            dir.display()
        );
    }
    Ok(chats)
}

fn beam_chat(folder: &Path) -> Result<BeamChat> {
    let id = {
        let mut parts = folder.iter().rev().take(2).collect::<Vec<_>>();
        parts.reverse();
        parts
            .iter()
            .map(|p| p.to_string_lossy())
            .collect::<Vec<_>>()
            .join("/")
    };
    let chat_path = folder.join("chat.json");
    let batches: Value = serde_json::from_reader(reader(&chat_path)?)
        .with_context(|| format!("{} is not JSON", chat_path.display()))?;
    let Value::Array(batches) = batches else {
        bail!("{}: expected a JSON array of batches", chat_path.display());
    };
    let mut sessions = Vec::new();
    for batch in &batches {
        let turns = batch["turns"]
            .as_array()
            .with_context(|| format!("{}: a batch without turns", chat_path.display()))?;
        let messages: Vec<&Value> = turns
            .iter()
            .flat_map(|t| t.as_array().into_iter().flatten())
            .collect();
        let anchor = batch["time_anchor"].as_str().or_else(|| {
            messages
                .iter()
                .find_map(|m| m.get("time_anchor").and_then(Value::as_str))
        });
        let messages = messages
            .into_iter()
            .map(|m| {
                let id = match &m["id"] {
                    Value::Number(n) => n.to_string(),
                    Value::String(s) => s.clone(),
                    other => bail!("{}: a message id {other}", chat_path.display()),
                };
                let from_user = match m["role"].as_str() {
                    Some("user") => true,
                    Some("assistant") => false,
                    other => bail!("{}: message {id} has role {other:?}", chat_path.display()),
                };
                let content = m["content"].as_str().unwrap_or_default();
                let content = if from_user {
                    strip_beam_marker(content)
                } else {
                    content
                };
                Ok(BeamMessage {
                    id,
                    from_user,
                    content: content.to_owned(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        sessions.push(BeamSession {
            date: anchor.and_then(parse_beam_date),
            messages,
        });
    }
    let questions_path = folder.join("probing_questions/probing_questions.json");
    let by_kind: Value = serde_json::from_reader(reader(&questions_path)?)
        .with_context(|| format!("{} is not JSON", questions_path.display()))?;
    let Value::Object(by_kind) = by_kind else {
        bail!(
            "{}: expected an object of question types",
            questions_path.display()
        );
    };
    let mut questions = Vec::new();
    for (kind, list) in &by_kind {
        if kind == "abstention" {
            continue;
        }
        for q in list.as_array().into_iter().flatten() {
            let mut evidence = Vec::new();
            flatten_ids(&q["source_chat_ids"], &mut evidence);
            evidence.sort();
            evidence.dedup();
            questions.push(BeamQuestion {
                kind: kind.clone(),
                question: q["question"].as_str().unwrap_or_default().to_owned(),
                evidence,
            });
        }
    }
    Ok(BeamChat {
        id,
        sessions,
        questions,
    })
}

/// Message ids anywhere in `value`: a number, a list, or an object of lists
/// (`{"first_statement": [58], "second_statement": [24]}`).
fn flatten_ids(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Number(n) => out.push(n.to_string()),
        Value::String(s) if !s.trim().is_empty() => out.push(s.trim().to_owned()),
        Value::Array(items) => items.iter().for_each(|v| flatten_ids(v, out)),
        Value::Object(map) => map.values().for_each(|v| flatten_ids(v, out)),
        _ => {}
    }
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
    #[test]
    fn a_beam_chat_reads() {
        let dir = tempfile::tempdir().unwrap();
        let chat = dir.path().join("500K").join("7");
        std::fs::create_dir_all(chat.join("probing_questions")).unwrap();
        std::fs::write(
            chat.join("chat.json"),
            r#"[{"batch_number": 1, "time_anchor": null, "turns": [
                  [{"role": "user", "id": 0, "time_anchor": "March-15-2024", "content": "I use Redis 7 ->-> 1,1"},
                   {"role": "assistant", "id": 1, "content": "Noted."}],
                  [{"role": "user", "id": 2, "content": "And port 6380."}]]},
                {"batch_number": 2, "time_anchor": "April-02-2024", "turns": [
                  [{"role": "assistant", "id": 3, "content": "Welcome back ->-> not a marker of mine"}]]}]"#,
        )
        .unwrap();
        std::fs::write(
            chat.join("probing_questions/probing_questions.json"),
            r#"{"abstention": [{"question": "x?"}],
                "knowledge_update": [{"question": "Which port?", "source_chat_ids": {"first": [2], "second": [0, 2]}}],
                "summarization": [{"question": "Sum up?", "source_chat_ids": [[0, 1], 3]}]}"#,
        )
        .unwrap();
        // A folder of chats, one of them without chat.json (skipped).
        std::fs::create_dir_all(dir.path().join("500K").join("8")).unwrap();
        let chats = beam(&dir.path().join("500K")).unwrap();
        assert_eq!(chats.len(), 1);
        let c = &chats[0];
        assert_eq!(c.id, "500K/7");
        assert_eq!(c.sessions.len(), 2);
        let first = &c.sessions[0];
        assert_eq!(
            first.date.unwrap().to_rfc3339(),
            "2024-03-15T09:00:00+00:00"
        );
        assert_eq!(first.messages[0].content, "I use Redis 7");
        assert!(first.messages[0].from_user && !first.messages[1].from_user);
        assert_eq!(
            c.sessions[1].date.unwrap().to_rfc3339(),
            "2024-04-02T09:00:00+00:00"
        );
        assert_eq!(
            c.sessions[1].messages[0].content, "Welcome back ->-> not a marker of mine",
            "only user messages carry the marker"
        );
        assert_eq!(c.questions.len(), 2, "abstention left out");
        assert_eq!(c.questions[0].evidence, ["0", "2"]);
        assert_eq!(c.questions[1].evidence, ["0", "1", "3"]);
        assert!(
            beam(dir.path()).is_err(),
            "no chat folder directly under it"
        );
    }
}
