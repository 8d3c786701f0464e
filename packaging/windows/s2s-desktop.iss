; Inno Setup 6 script: dist\s2s-desktop-setup.exe from the PyInstaller bundle dist\s2s-desktop\.
;
;   iscc packaging\windows\s2s-desktop.iss /DAppVersion=0.1.0
;   signed:  iscc /DSign "/Ss2ssign=signtool sign /fd sha256 /f cert.pfx /p PASSWORD
;            /tr http://timestamp.digicert.com /td sha256 $f" packaging\windows\s2s-desktop.iss
;
; Per-user install (no administrator prompt) into %LOCALAPPDATA%\Programs\S2S Desktop, a
; Start-menu entry, an optional start at sign-in, and an uninstaller that keeps the downloaded
; models unless the user ticks the box to delete them.

#ifndef AppVersion
  #define AppVersion "0.1.0"
#endif
#ifndef BundleDir
  #define BundleDir "..\..\dist\s2s-desktop"
#endif
#define AppName "S2S Desktop"
#define AppExe "s2s-desktop.exe"
#define CliExe "s2s-desktop-cli.exe"
#ifdef Sign
  #define SignFlags " sign"
#else
  #define SignFlags ""
#endif

[Setup]
AppId={{5B0E7C52-9A4F-4C1E-8F3A-2D6B1E0C9A71}
AppName={#AppName}
AppVersion={#AppVersion}
AppVerName={#AppName} {#AppVersion}
AppPublisher=s2s-desktop
VersionInfoVersion={#AppVersion}
; Per user: no UAC prompt, installs under the user's profile, uninstall entry in HKCU.
PrivilegesRequired=lowest
DefaultDirName={localappdata}\Programs\{#AppName}
DefaultGroupName={#AppName}
DisableProgramGroupPage=yes
DisableDirPage=auto
UsePreviousAppDir=yes
ArchitecturesAllowed=x64compatible
ArchitecturesInstallIn64BitMode=x64compatible
MinVersion=10.0
OutputDir=..\..\dist
OutputBaseFilename=s2s-desktop-setup
UninstallDisplayIcon={app}\{#AppExe}
UninstallDisplayName={#AppName}
Compression=lzma2/max
SolidCompression=yes
LZMAUseSeparateProcess=yes
WizardStyle=modern
; A running copy holds its files open: close it (Restart Manager) before replacing them.
CloseApplications=yes
RestartApplications=no
#ifdef Sign
SignTool=s2ssign
SignedUninstaller=yes
#endif

[Languages]
Name: "en"; MessagesFile: "compiler:Default.isl"

[Tasks]
Name: "startatlogin"; Description: "Start {#AppName} when I sign in"; GroupDescription: "Startup:"; Flags: unchecked
Name: "desktopicon"; Description: "Create a desktop shortcut"; GroupDescription: "Shortcuts:"; Flags: unchecked

[Files]
Source: "{#BundleDir}\{#AppExe}"; DestDir: "{app}"; Flags: ignoreversion{#SignFlags}
Source: "{#BundleDir}\{#CliExe}"; DestDir: "{app}"; Flags: ignoreversion{#SignFlags}
Source: "{#BundleDir}\*"; DestDir: "{app}"; Excludes: "{#AppExe},{#CliExe}"; Flags: ignoreversion recursesubdirs createallsubdirs

[Icons]
Name: "{autoprograms}\{#AppName}"; Filename: "{app}\{#AppExe}"
Name: "{autodesktop}\{#AppName}"; Filename: "{app}\{#AppExe}"; Tasks: desktopicon
; The user's Startup folder: removed again by the uninstaller.
Name: "{userstartup}\{#AppName}"; Filename: "{app}\{#AppExe}"; Tasks: startatlogin

[Run]
Filename: "{app}\{#AppExe}"; Description: "Start {#AppName} now"; Flags: nowait postinstall skipifsilent

[Code]
var
  DeleteModels: Boolean;

{ The uninstaller's one question, as a box to tick: the models are kept unless it is ticked. }
function AskAboutModels(var Delete: Boolean): Boolean;
var
  Form: TSetupForm;
  Note: TNewStaticText;
  Box: TNewCheckBox;
  OkButton, CancelButton: TNewButton;
begin
#if Ver >= EncodeVer(6, 6, 0)
  Form := CreateCustomForm(440, 150, False, False);
#else
  Form := CreateCustomForm();
  Form.ClientWidth := ScaleX(440);
  Form.ClientHeight := ScaleY(150);
#endif
  try
    Form.Caption := 'Uninstall {#AppName}';
    Note := TNewStaticText.Create(Form);
    Note.Parent := Form;
    Note.AutoSize := False;
    Note.WordWrap := True;
    Note.Left := ScaleX(16);
    Note.Top := ScaleY(14);
    Note.Width := Form.ClientWidth - ScaleX(32);
    Note.Height := ScaleY(56);
    Note.Caption := '{#AppName} will be removed. The speech and language models it downloaded ' +
      'stay in the model cache (shared with other Hugging Face tools), so a reinstall needs no ' +
      'new download. Your settings and conversation history are kept too.';
    Box := TNewCheckBox.Create(Form);
    Box.Parent := Form;
    Box.Left := ScaleX(16);
    Box.Top := ScaleY(78);
    Box.Width := Form.ClientWidth - ScaleX(32);
    Box.Height := ScaleY(20);
    Box.Caption := 'Also delete the models {#AppName} downloaded';
    Box.Checked := False;
    OkButton := TNewButton.Create(Form);
    OkButton.Parent := Form;
    OkButton.Caption := 'Uninstall';
    OkButton.ModalResult := mrOk;
    OkButton.Default := True;
    OkButton.Width := ScaleX(88);
    OkButton.Height := ScaleY(24);
    OkButton.Top := Form.ClientHeight - ScaleY(36);
    OkButton.Left := Form.ClientWidth - ScaleX(2 * 88 + 24);
    CancelButton := TNewButton.Create(Form);
    CancelButton.Parent := Form;
    CancelButton.Caption := 'Cancel';
    CancelButton.ModalResult := mrCancel;
    CancelButton.Cancel := True;
    CancelButton.Width := ScaleX(88);
    CancelButton.Height := ScaleY(24);
    CancelButton.Top := OkButton.Top;
    CancelButton.Left := Form.ClientWidth - ScaleX(88 + 16);
    Result := Form.ShowModal() = mrOk;
    Delete := Box.Checked;
  finally
    Form.Free();
  end;
end;

function InitializeUninstall(): Boolean;
begin
  DeleteModels := False;
  Result := True;
  { A silent uninstall (/SILENT, /VERYSILENT) keeps the models. }
  if not UninstallSilent() then
    Result := AskAboutModels(DeleteModels);
end;

{ Each catalog model the app can download, deleted by the app itself (it knows its cache). }
procedure DeleteDownloadedModels();
var
  Ids: TArrayOfString;
  I, Code: Integer;
  Cli, ListFile: String;
begin
  Cli := ExpandConstant('{app}\{#CliExe}');
  ListFile := ExpandConstant('{app}\_internal\packaging\downloadable-models.txt');
  if not FileExists(Cli) or not LoadStringsFromFile(ListFile, Ids) then
    Exit;
  for I := 0 to GetArrayLength(Ids) - 1 do
    if Trim(Ids[I]) <> '' then
    begin
      if not Exec(Cli, 'models delete "' + Trim(Ids[I]) + '"', '', SW_HIDE,
                  ewWaitUntilTerminated, Code) then
        Code := -1;
      Log('models delete ' + Trim(Ids[I]) + ': exit code ' + IntToStr(Code));
    end;
end;

procedure CurUninstallStepChanged(CurUninstallStep: TUninstallStep);
var
  Code: Integer;
begin
  { usUninstall comes before the files are removed: the app's executables still run. }
  if CurUninstallStep = usUninstall then
  begin
    { Ask a running app to quit (its IPC command) so its files and models can be removed. }
    if FileExists(ExpandConstant('{app}\{#CliExe}')) then
      Exec(ExpandConstant('{app}\{#CliExe}'), 'quit', '', SW_HIDE, ewWaitUntilTerminated, Code);
    if DeleteModels then
      DeleteDownloadedModels();
  end;
end;
