// A minimal VS Code client for `gpulint server` (the language server is in the gpulint binary).
const vscode = require('vscode');
const { LanguageClient } = require('vscode-languageclient/node');

let client;

function activate() {
  const command = vscode.workspace.getConfiguration('gpulint').get('path') || 'gpulint';
  const manifests = '**/{requirements*.txt,requirements/*.txt,pyproject.toml,environment*.yml,environment*.yaml,conda*.yml,conda*.yaml,Dockerfile,Dockerfile.*,*.dockerfile}';
  client = new LanguageClient(
    'gpulint',
    'gpulint',
    { command, args: ['server'] },
    {
      documentSelector: [
        { language: 'python' },
        { language: 'cuda-cpp' },
        { language: 'cpp' },
        { language: 'c' },
        { scheme: 'file', pattern: manifests },
        { notebook: 'jupyter-notebook', language: 'python' },
      ],
    },
  );
  return client.start();
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
