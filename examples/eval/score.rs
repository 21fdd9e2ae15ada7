//! Answer scoring: SQuAD-style normalisation, exact and substring match, token F1.

use std::collections::HashMap;

/// Lowercase, punctuation removed, articles (`a`, `an`, `the`) dropped, whitespace collapsed.
pub fn normalize(text: &str) -> String {
    let cleaned: String = text
        .to_lowercase()
        .chars()
        .map(|c| if c.is_alphanumeric() { c } else { ' ' })
        .collect();
    cleaned
        .split_whitespace()
        .filter(|w| !matches!(*w, "a" | "an" | "the"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether the normalised prediction equals a normalised gold answer.
pub fn exact_match(prediction: &str, golds: &[String]) -> bool {
    let p = normalize(prediction);
    golds.iter().any(|g| normalize(g) == p)
}

/// Whether a normalised gold answer occurs in the normalised prediction, on word boundaries
/// (the paper's document-QA metric: the answer is "in" the reply).
pub fn contains_answer(prediction: &str, golds: &[String]) -> bool {
    let p = format!(" {} ", normalize(prediction));
    golds.iter().any(|g| {
        let g = normalize(g);
        !g.is_empty() && p.contains(&format!(" {g} "))
    })
}

/// Normalised words.
fn words(text: &str) -> Vec<String> {
    normalize(text)
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// The best of `score(prediction words, gold words)` over the gold answers.
fn best_over_golds(
    prediction: &str,
    golds: &[String],
    score: impl Fn(&[String], &[String]) -> f64,
) -> f64 {
    let p = words(prediction);
    golds
        .iter()
        .map(|g| score(&p, &words(g)))
        .fold(0.0, f64::max)
}

/// The best token-level F1 of the prediction against any gold answer.
pub fn f1(prediction: &str, golds: &[String]) -> f64 {
    best_over_golds(prediction, golds, |p, g| {
        if p.is_empty() || g.is_empty() {
            return f64::from(u8::from(p == g));
        }
        let mut counts: HashMap<&str, i32> = HashMap::new();
        for w in g {
            *counts.entry(w).or_default() += 1;
        }
        let mut common = 0;
        for w in p {
            if let Some(c) = counts.get_mut(w.as_str())
                && *c > 0
            {
                *c -= 1;
                common += 1;
            }
        }
        if common == 0 {
            return 0.0;
        }
        let precision = common as f64 / p.len() as f64;
        let recall = common as f64 / g.len() as f64;
        2.0 * precision * recall / (precision + recall)
    })
}

/// ROUGE-L recall: the longest common subsequence of normalised words, over the gold
/// answer's length (the paper's DMR metric), best over the gold answers.
pub fn rouge_l_recall(prediction: &str, golds: &[String]) -> f64 {
    best_over_golds(prediction, golds, |p, g| {
        if g.is_empty() {
            return 0.0;
        }
        let mut row = vec![0usize; p.len() + 1];
        for gw in g {
            let mut diagonal = 0;
            for (j, pw) in p.iter().enumerate() {
                let above = row[j + 1];
                row[j + 1] = if gw == pw {
                    diagonal + 1
                } else {
                    row[j + 1].max(row[j])
                };
                diagonal = above;
            }
        }
        row[p.len()] as f64 / g.len() as f64
    })
}

/// The judge prompt for an LLM-as-judge score (the reply must start with CORRECT or WRONG).
pub fn judge_prompt(question: &str, golds: &[String], prediction: &str) -> String {
    format!(
        "You grade answers. Question: {question}\nGold answer(s): {}\nAnswer to grade: \
         {prediction}\nIs the answer correct (it states the gold answer or an equivalent, \
         possibly with more detail)? Reply with one word: CORRECT or WRONG.",
        golds.join(" | ")
    )
}

/// Reads a judge's reply: correct only when its first word is exactly `CORRECT` (any case,
/// punctuation and markdown around it ignored). `WRONG`, `INCORRECT`, `NOT CORRECT` and
/// anything unreadable are not.
pub fn judge_verdict(reply: &str) -> bool {
    let first = reply
        .split(|c: char| !c.is_alphanumeric())
        .find(|w| !w.is_empty())
        .unwrap_or_default();
    first.eq_ignore_ascii_case("CORRECT")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn golds(g: &[&str]) -> Vec<String> {
        g.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn normalisation_drops_case_punctuation_and_articles() {
        assert_eq!(normalize("The  Eiffel-Tower!"), "eiffel tower");
        assert!(exact_match("the eiffel tower.", &golds(&["Eiffel Tower"])));
        assert!(!exact_match("Eiffel", &golds(&["Eiffel Tower"])));
    }

    #[test]
    fn substring_match_respects_word_boundaries() {
        let g = golds(&["1969", "Neil Armstrong"]);
        assert!(contains_answer("It was Neil Armstrong, in July.", &g));
        assert!(contains_answer("in 1969", &g));
        assert!(!contains_answer("in 19690", &g));
        assert!(!contains_answer("Neil", &g));
        assert!(
            !contains_answer("anything", &golds(&["a"])),
            "empty after normalising"
        );
    }

    #[test]
    fn f1_counts_shared_tokens() {
        assert_eq!(f1("Neil Armstrong", &golds(&["Neil Armstrong"])), 1.0);
        let half = f1("Neil", &golds(&["Neil Armstrong"]));
        assert!((half - 2.0 / 3.0).abs() < 1e-9, "{half}");
        assert_eq!(f1("Buzz", &golds(&["Neil Armstrong"])), 0.0);
        assert_eq!(f1("x", &golds(&["nope", "x"])), 1.0, "best gold counts");
    }

    #[test]
    fn rouge_l_recall_follows_the_longest_common_subsequence() {
        let g = golds(&["adopted a puppy named Rex"]);
        assert_eq!(rouge_l_recall("She adopted a puppy named Rex.", &g), 1.0);
        assert_eq!(rouge_l_recall("Rex the puppy", &g), 0.25, "order matters");
        assert_eq!(rouge_l_recall("named puppy", &g), 0.25);
        assert_eq!(rouge_l_recall("", &g), 0.0);
    }

    #[test]
    fn judge_verdicts() {
        assert!(judge_verdict("CORRECT"));
        assert!(judge_verdict(" correct, it says 1969"));
        assert!(judge_verdict("**CORRECT**."));
        assert!(!judge_verdict("WRONG"));
        assert!(
            !judge_verdict("INCORRECT"),
            "a word containing CORRECT is not CORRECT"
        );
        assert!(!judge_verdict("Incorrect: the answer is 1970"));
        assert!(!judge_verdict("Not CORRECT: WRONG"));
        assert!(
            !judge_verdict("The answer is correct"),
            "the verdict word comes first"
        );
        assert!(!judge_verdict(""));
    }
}
