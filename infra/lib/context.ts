// StackSyncProps from the CDK context: cdk.json's "context", or
// `npx cdk deploy -c stackNamePrefix=prod- -c cloudFormationRoleArns=arn1,arn2`.
// The keys are template.yaml's parameters' props (`stackNamePrefix` for `StackNamePrefix`), read by the
// parameter's type: a CommaDelimitedList from a JSON list or a comma-separated string, a Number as a number.
import type { Node } from 'constructs';
import type { CfnTemplate } from './template';
import { propName, type StackSyncParameters } from './stacksync-stack';

/** A list from the context: a JSON array (cdk.json) or a comma-separated string (`-c key=a,b`). */
function list(value: unknown): string[] {
  const items = Array.isArray(value) ? value : String(value).split(',');
  return items.map((v) => String(v).trim()).filter((v) => v !== '');
}

/** A parameter whose values are true and false: a boolean prop (`requireRoleArn`). */
function isBoolean(allowed: unknown[] | undefined): boolean {
  return allowed !== undefined && allowed.length === 2 && allowed.includes('true') && allowed.includes('false');
}

/** The props given in the context, one per parameter of `template` (a key left out: the parameter's default). */
export function propsFromContext(node: Node, template: CfnTemplate): StackSyncParameters {
  const props: Record<string, unknown> = {};
  for (const [name, declaration] of Object.entries(template.Parameters ?? {})) {
    const key = propName(name);
    const value: unknown = node.tryGetContext(key);
    if (value === undefined || value === null) continue;
    if (declaration.Type === 'CommaDelimitedList') props[key] = list(value);
    else if (declaration.Type === 'Number') props[key] = Number(value);
    else if (isBoolean(declaration.AllowedValues)) props[key] = value === true || value === 'true' ? true : value === false || value === 'false' ? false : value;
    else props[key] = String(value).trim();
  }
  return props as StackSyncParameters;
}
