//! An AWS Organizations tree in the emulator (moto's): the organization of
//! its default account (made once, shared by every test), units and
//! accounts of each test's own.

use aws_sdk_organizations::Client;

use crate::{Emulator, unique_name};

/// The emulator's organization, through its management account.
#[derive(Debug)]
pub struct Organization {
    pub client: Client,
    /// The root (`r-…`).
    pub root: String,
}

impl Organization {
    /// The organization, made if there is none yet.
    pub async fn shared() -> Organization {
        let client = Client::new(&Emulator::shared().sdk_config());
        // Made by the first test to ask; the others find it.
        let _ = client
            .create_organization()
            .feature_set(aws_sdk_organizations::types::OrganizationFeatureSet::All)
            .send()
            .await;
        let roots = client.list_roots().send().await.expect("ListRoots");
        let root = roots.roots()[0].id().expect("a root id").to_owned();
        Organization { client, root }
    }

    /// A new unit under `parent` (the root when `None`).
    pub async fn unit(&self, parent: Option<&str>) -> String {
        let out = self
            .client
            .create_organizational_unit()
            .parent_id(parent.unwrap_or(&self.root))
            .name(unique_name("ou"))
            .send()
            .await
            .expect("CreateOrganizationalUnit");
        out.organizational_unit()
            .and_then(|u| u.id())
            .expect("a unit id")
            .to_owned()
    }

    /// A new account, moved under `unit`.
    pub async fn account(&self, unit: &str) -> String {
        let name = unique_name("acct");
        let out = self
            .client
            .create_account()
            .email(format!("{name}@example.org"))
            .account_name(&name)
            .send()
            .await
            .expect("CreateAccount");
        let account = out
            .create_account_status()
            .and_then(|s| s.account_id())
            .expect("an account id")
            .to_owned();
        self.move_account(&account, &self.root.clone(), unit).await;
        account
    }

    /// `account` moves from `from` to `to`.
    pub async fn move_account(&self, account: &str, from: &str, to: &str) {
        self.client
            .move_account()
            .account_id(account)
            .source_parent_id(from)
            .destination_parent_id(to)
            .send()
            .await
            .expect("MoveAccount");
    }
}

/// The role the fleet tests reach each account through.
pub const TARGET_ROLE: &str = "stacksync-target";

/// The stack `name` in `account` and `region` (through [`TARGET_ROLE`]),
/// as `DescribeStacks` gives it; `None`: there is none.
pub async fn stack_in(
    account: &str,
    region: &str,
    name: &str,
) -> Option<aws_sdk_cloudformation::types::Stack> {
    let role = format!("arn:aws:iam::{account}:role/{TARGET_ROLE}");
    let config = Emulator::shared().assumed_config(&role).await;
    let config = config
        .to_builder()
        .region(aws_config::Region::new(region.to_owned()))
        .build();
    let out = aws_sdk_cloudformation::Client::new(&config)
        .describe_stacks()
        .stack_name(name)
        .send()
        .await
        .ok()?;
    out.stacks().first().cloned()
}
