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
        // A match, not a search of `name`'s: this runs on every call.
        match s {
            "raise" => Some(Mode::Raise),
            "zero" => Some(Mode::Zero),
            "clip" => Some(Mode::Clip),
            _ => None,
        }
    }

    /// The Python-facing spelling, as [`Mode::parse`] reads it.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Raise => "raise",
            Mode::Zero => "zero",
            Mode::Clip => "clip",
        }
    }
}

/// Runs `$body` with the consts `$clip` and `$zero` bound to what `$mode`
/// (a [`Mode`]) does with an index out of range, for loops compiled once
/// per mode.
macro_rules! with_mode {
    ($mode:expr, $clip:ident, $zero:ident => $body:expr) => {
        $crate::mode::with_mode!(@ $mode, $clip, $zero, $body,
            Raise false false, Zero false true, Clip true false)
    };
    (@ $mode:expr, $clip:ident, $zero:ident, $body:expr, $($m:ident $c:literal $z:literal),*) => {
        match $mode {
            $($crate::mode::Mode::$m => {
                const $clip: bool = $c;
                const $zero: bool = $z;
                $body
            })*
        }
    };
}
pub(crate) use with_mode;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_names() {
        assert_eq!(Mode::parse("zero"), Some(Mode::Zero));
        assert_eq!(Mode::parse("wrap"), None);
        for mode in [Mode::Raise, Mode::Zero, Mode::Clip] {
            assert_eq!(Mode::parse(mode.name()), Some(mode));
        }
    }
}
