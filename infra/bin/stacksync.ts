#!/usr/bin/env node
// The stacksync CDK app: `npx cdk deploy` (see ../README.md for the context values).
import * as path from 'node:path';
import { App, Aspects } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { propsFromContext } from '../lib/context';
import { StackSyncStack, findWorkspaceRoot } from '../lib/stacksync-stack';
import { loadTemplate } from '../lib/template';

const app = new App();
const template = loadTemplate(path.join(findWorkspaceRoot(), 'template.yaml'));
// Environment-agnostic, like template.yaml: ARNs use the AWS::Partition/AccountId pseudo parameters.
new StackSyncStack(app, String(app.node.tryGetContext('stackName') ?? 'stacksync'), propsFromContext(app.node, template));
// Unsuppressed AwsSolutions errors fail `cdk synth`/`cdk deploy`; the test fails on warnings too.
Aspects.of(app).add(new AwsSolutionsChecks({ verbose: true }));
