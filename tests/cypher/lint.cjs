// Lint Cypher statements with Neo4j's own parser and function/procedure registry.
// stdin: JSON array of statements. stdout: JSON array of {index, errors, warnings}.
'use strict';
const ls = require('@neo4j-cypher/language-support');

const mock = ls.testData.mockSchema; // Neo4j's built-in functions and procedures, shipped with the package
const schema = { functions: mock.functions, procedures: mock.procedures, defaultLanguage: 'CYPHER 5' };

let input = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => { input += chunk; });
process.stdin.on('end', () => {
  const statements = JSON.parse(input);
  const report = statements.map((query, index) => {
    // Parameters are bound at run time, so "parameter not defined" is not an error here.
    const diagnostics = ls.lintCypherQuery(query, schema).diagnostics.filter(ls.isNotParamError);
    return {
      index,
      errors: diagnostics.filter((d) => d.severity === 1).map((d) => d.message),
      warnings: diagnostics.filter((d) => d.severity !== 1).map((d) => d.message),
    };
  });
  process.stdout.write(JSON.stringify(report));
});
