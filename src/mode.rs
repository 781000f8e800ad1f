//! What an index outside its axis does.

/// What an index outside `[-s, s)` does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Report an `IndexError`.
    Raise,
    /// Fill the slice it addresses with zero bytes.
    Zero,
    /// Wrap negatives, then clamp into `[0, s - 1]`.
    Clip,
}

impl Mode {
    /// Parses the Python-facing spelling.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "raise" => Some(Mode::Raise),
            "zero" => Some(Mode::Zero),
            "clip" => Some(Mode::Clip),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_names() {
        assert_eq!(Mode::parse("zero"), Some(Mode::Zero));
        assert_eq!(Mode::parse("wrap"), None);
    }
}
