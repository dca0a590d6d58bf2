//! AWS partitions: which ARN partition and DNS suffix a region belongs to.
//! ARNs and endpoint URLs are built from these, never with `aws` or
//! `amazonaws.com` written in (a China or GovCloud installation would then
//! name resources and buckets that do not exist).
//!
//! From the SDKs' partition data (botocore `partitions.json`): region name
//! prefixes and DNS suffixes.

/// One AWS partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Partition {
    /// The partition in ARNs: `aws`, `aws-cn`, `aws-us-gov`, …
    pub id: &'static str,
    /// The DNS suffix of its service endpoints: `amazonaws.com`, `amazonaws.com.cn`, …
    pub dns_suffix: &'static str,
}

/// Region name prefix → partition; the first match wins, `aws` otherwise.
const PARTITIONS: [(&str, Partition); 7] = [
    (
        "cn-",
        Partition {
            id: "aws-cn",
            dns_suffix: "amazonaws.com.cn",
        },
    ),
    (
        "us-gov-",
        Partition {
            id: "aws-us-gov",
            dns_suffix: "amazonaws.com",
        },
    ),
    (
        "us-isob-",
        Partition {
            id: "aws-iso-b",
            dns_suffix: "sc2s.sgov.gov",
        },
    ),
    (
        "us-isof-",
        Partition {
            id: "aws-iso-f",
            dns_suffix: "csp.hci.ic.gov",
        },
    ),
    (
        "us-iso-",
        Partition {
            id: "aws-iso",
            dns_suffix: "c2s.ic.gov",
        },
    ),
    (
        "eu-isoe-",
        Partition {
            id: "aws-iso-e",
            dns_suffix: "cloud.adc-e.uk",
        },
    ),
    (
        "eusc-",
        Partition {
            id: "aws-eusc",
            dns_suffix: "amazonaws.eu",
        },
    ),
];

/// The commercial partition.
pub const AWS: Partition = Partition {
    id: "aws",
    dns_suffix: "amazonaws.com",
};

/// The partition of `region` (`eu-west-1` → `aws`, `cn-north-1` → `aws-cn`).
pub fn of_region(region: &str) -> Partition {
    PARTITIONS
        .iter()
        .find(|(prefix, _)| region.starts_with(prefix))
        .map_or(AWS, |(_, partition)| *partition)
}

/// A bucket's regional virtual-hosted URL: `https://BUCKET.s3.REGION.SUFFIX`.
pub fn s3_bucket_url(bucket: &str, region: &str) -> String {
    format!(
        "https://{bucket}.s3.{region}.{}",
        of_region(region).dns_suffix
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_belong_to_their_partition() {
        let cases = [
            ("us-east-1", "aws", "amazonaws.com"),
            ("eu-central-2", "aws", "amazonaws.com"),
            ("cn-north-1", "aws-cn", "amazonaws.com.cn"),
            ("cn-northwest-1", "aws-cn", "amazonaws.com.cn"),
            ("us-gov-west-1", "aws-us-gov", "amazonaws.com"),
            ("us-iso-east-1", "aws-iso", "c2s.ic.gov"),
            ("us-isob-east-1", "aws-iso-b", "sc2s.sgov.gov"),
            ("us-isof-south-1", "aws-iso-f", "csp.hci.ic.gov"),
            ("eu-isoe-west-1", "aws-iso-e", "cloud.adc-e.uk"),
            ("eusc-de-east-1", "aws-eusc", "amazonaws.eu"),
        ];
        for (region, id, suffix) in cases {
            assert_eq!(
                of_region(region),
                Partition {
                    id,
                    dns_suffix: suffix
                },
                "{region}"
            );
        }
    }

    #[test]
    fn bucket_urls_use_the_partitions_domain() {
        assert_eq!(
            s3_bucket_url("b", "eu-west-1"),
            "https://b.s3.eu-west-1.amazonaws.com"
        );
        assert_eq!(
            s3_bucket_url("b", "cn-north-1"),
            "https://b.s3.cn-north-1.amazonaws.com.cn"
        );
        assert_eq!(
            s3_bucket_url("b", "us-gov-west-1"),
            "https://b.s3.us-gov-west-1.amazonaws.com"
        );
    }
}
