//! YAML read with a bound on what anchors and aliases expand to.
//!
//! The parser limits how often aliases are followed, not what they expand
//! to: anchors that nest aliases of anchors ("billion laughs") make a small
//! file a huge value. Every YAML stacksync reads (templates, `stacks.yaml`)
//! is first walked by [`check_expansion`], which counts the nodes the
//! reader would build, aliases expanded, and stops at [`MAX_YAML_NODES`]
//! before building any of them.

use std::cell::Cell;
use std::fmt;

use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, VariantAccess, Visitor,
};

/// The most nodes (scalars, lists, maps) a YAML document may expand to. A
/// 1 MB template without aliases has at most about 500,000 (two bytes a
/// node); twice that leaves room, and stops an expansion long before it
/// costs memory or time.
pub const MAX_YAML_NODES: u64 = 1_000_000;

/// Whether `text` expands to at most `limit` nodes; the error says so (a
/// syntax error is left to the real read, which reports it with its line).
pub fn check_expansion(text: &str, limit: u64) -> Result<(), String> {
    let count = Cell::new(0);
    let de = serde_yaml_ng::Deserializer::from_str(text);
    match (Count {
        count: &count,
        limit,
    })
    .deserialize(de)
    {
        Err(e) if count.get() > limit => Err(format!(
            "it expands to more than {limit} values through its anchors and aliases ({e})"
        )),
        _ => Ok(()),
    }
}

#[derive(Clone, Copy)]
struct Count<'a> {
    count: &'a Cell<u64>,
    limit: u64,
}

impl Count<'_> {
    fn tick<E: de::Error>(self) -> Result<(), E> {
        let n = self.count.get() + 1;
        self.count.set(n);
        if n > self.limit {
            return Err(E::custom("too many values"));
        }
        Ok(())
    }
}

impl<'de> DeserializeSeed<'de> for Count<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Count<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        self.tick()
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        self.tick()
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        self.tick()
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        self.tick()
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        self.tick()
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.tick()
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.tick()
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        self.deserialize(d)
    }
    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        self.deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.tick()?;
        while seq.next_element_seed(self)?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.tick()?;
        while map.next_key_seed(self)?.is_some() {
            map.next_value_seed(self)?;
        }
        Ok(())
    }
    /// A tagged value (`!Ref x`, `!GetAtt a.b`): the tag, then the value.
    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<(), A::Error> {
        self.tick()?;
        let ((), variant) = data.variant_seed(Tag)?;
        variant.newtype_variant_seed(self)
    }
}

/// A tag's name: counted with its value.
struct Tag;

impl<'de> DeserializeSeed<'de> for Tag {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_identifier(de::IgnoredAny).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One anchor of `width` values, and `copies` aliases of it: the
    /// parser's own limit counts the aliases followed (at most 100 per
    /// event of the file), not what each one expands to.
    fn wide(width: usize, copies: usize) -> String {
        format!(
            "a: &a [{}]\nb: [{}]\n",
            vec!["x"; width].join(", "),
            vec!["*a"; copies].join(", ")
        )
    }

    #[test]
    fn an_expansion_past_the_bound_is_refused_quickly_and_an_ordinary_file_passes() {
        // About 150 KB, 100 million values once expanded.
        let text = wide(50_000, 2_000);
        let started = std::time::Instant::now();
        let err = check_expansion(&text, MAX_YAML_NODES).unwrap_err();
        assert!(err.contains("expands to more than 1000000 values"), "{err}");
        assert!(started.elapsed() < std::time::Duration::from_secs(30));
        // The parser alone would build it all.
        assert_eq!(check_expansion(&wide(50_000, 10), MAX_YAML_NODES), Ok(()));
        let template = "Resources:\n  Q:\n    Type: AWS::SQS::Queue\n    Properties:\n      QueueName: !Sub '${AWS::StackName}-q'\n      Tags: &t [{Key: a, Value: !Ref B}]\n  R:\n    Type: AWS::SQS::Queue\n    Properties: {Tags: *t}\n";
        assert_eq!(check_expansion(template, 100), Ok(()));
        assert!(check_expansion(template, 10).is_err());
    }

    #[test]
    fn a_syntax_error_is_left_to_the_real_read() {
        assert_eq!(check_expansion("a: [unclosed", 10), Ok(()));
    }
}
