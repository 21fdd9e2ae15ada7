//! The context windows of hosted models the providers know by name.

/// The context window of well-known models, by name prefix; `None` for unknown models.
///
/// ```
/// assert_eq!(memgpt_providers::known_context_window("gpt-4o-mini"), Some(128_000));
/// assert_eq!(memgpt_providers::known_context_window("my-local-model"), None);
/// ```
pub fn known_context_window(model: &str) -> Option<usize> {
    let model = model.rsplit('/').next().unwrap_or(model);
    const TABLE: &[(&str, usize)] = &[
        ("gpt-4.1", 1_047_576),
        ("gpt-4o", 128_000),
        ("gpt-4-turbo", 128_000),
        ("gpt-4-1106", 128_000),
        ("gpt-4-0125", 128_000),
        ("gpt-4-32k", 32_768),
        ("gpt-4", 8_192),
        ("gpt-3.5-turbo-instruct", 4_096),
        ("gpt-3.5-turbo", 16_385),
        ("gpt-5", 400_000),
        ("o1", 200_000),
        ("o3", 200_000),
        ("o4", 200_000),
        ("claude", 200_000),
    ];
    TABLE
        .iter()
        .find(|(prefix, _)| model.starts_with(prefix))
        .map(|&(_, window)| window)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_windows_prefer_the_longest_matching_prefix_listed_first() {
        assert_eq!(known_context_window("gpt-4-turbo-preview"), Some(128_000));
        assert_eq!(known_context_window("gpt-4-0613"), Some(8_192));
        assert_eq!(known_context_window("openai/gpt-4o"), Some(128_000));
        assert_eq!(known_context_window("gpt-3.5-turbo"), Some(16_385));
    }
}
