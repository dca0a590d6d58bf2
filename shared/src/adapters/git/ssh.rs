//! SSH transport (in-process).

use super::Error;
use super::transport::BoxedTransport;
use crate::adapters::credentials::SshKey;

pub(super) fn connect(_url: &gix::Url, _key: &SshKey) -> Result<BoxedTransport, Error> {
    Err(Error::Refused("ssh:// is not supported yet".into()))
}
