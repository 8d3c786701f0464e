#!/usr/bin/env bash
# Build "S2S Desktop.app" and dist/s2s-desktop-<version>-macos-<arch>-<flavour>.dmg.
#
#   packaging/macos/build_dmg.sh            (flavour: $S2S_FLAVOUR, default mlx)
#
# Signed, notarised and stapled when these are set, otherwise an unsigned (ad-hoc) .dmg:
#   MACOS_SIGN_IDENTITY   "Developer ID Application: Name (TEAMID)" in the keychain
#   and either APPLE_NOTARY_PROFILE (a `xcrun notarytool store-credentials` profile)
#   or APPLE_ID + APPLE_TEAM_ID + APPLE_APP_PASSWORD (an app-specific password).
set -euo pipefail
[[ $(uname -s) == Darwin ]] || { echo "error: build_dmg.sh runs on macOS only" >&2; exit 2; }
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
cd "$ROOT"

FLAVOUR=${S2S_FLAVOUR:-mlx}
PY=${PYTHON:-python3}
VERSION=$("$PY" -c "import s2s_desktop; print(s2s_desktop.__version__)")
ARCH=$(uname -m)
APP="dist/S2S Desktop.app"
DMG="dist/s2s-desktop-$VERSION-macos-$ARCH-$FLAVOUR.dmg"
IDENTITY=${MACOS_SIGN_IDENTITY:-}

notary_args=()
if [[ -n ${APPLE_NOTARY_PROFILE:-} ]]; then
  notary_args=(--keychain-profile "$APPLE_NOTARY_PROFILE")
elif [[ -n ${APPLE_ID:-} && -n ${APPLE_TEAM_ID:-} && -n ${APPLE_APP_PASSWORD:-} ]]; then
  notary_args=(--apple-id "$APPLE_ID" --team-id "$APPLE_TEAM_ID" --password "$APPLE_APP_PASSWORD")
fi
if [[ -n $IDENTITY ]]; then
  security find-identity -v -p codesigning | grep -qF "$IDENTITY" || {
    echo "error: signing identity '$IDENTITY' is not in the keychain" >&2; exit 2; }
fi

# The spec signs every binary with hardened runtime + entitlements when the identity is set
# (PyInstaller's codesign_identity); without it PyInstaller signs ad hoc (arm64 needs that).
rm -rf "$APP" dist/s2s-desktop
S2S_FLAVOUR=$FLAVOUR MACOS_SIGN_IDENTITY=$IDENTITY PYTHON=$PY bash packaging/build.sh "$FLAVOUR"
[[ -d $APP ]] || { echo "error: PyInstaller made no $APP" >&2; exit 1; }
/usr/libexec/PlistBuddy -c "Print :NSMicrophoneUsageDescription" "$APP/Contents/Info.plist" >/dev/null
codesign --verify --deep --strict "$APP"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
cp -R "$APP" "$stage/"
ln -s /Applications "$stage/Applications"
rm -f "$DMG"
hdiutil create -volname "S2S Desktop" -srcfolder "$stage" -fs HFS+ -format UDZO -ov "$DMG"

if [[ -z $IDENTITY ]]; then
  echo "built unsigned $DMG ($(du -h "$DMG" | cut -f1)): Gatekeeper will ask users to"
  echo "right-click → Open the first time; set MACOS_SIGN_IDENTITY + notary credentials to sign"
  exit 0
fi
codesign --force --sign "$IDENTITY" --timestamp "$DMG"
if ((${#notary_args[@]} == 0)); then
  echo "signed $DMG, not notarised: set APPLE_NOTARY_PROFILE or APPLE_ID/APPLE_TEAM_ID/APPLE_APP_PASSWORD"
  exit 0
fi
result=$(xcrun notarytool submit "$DMG" "${notary_args[@]}" --wait --timeout 30m \
  --output-format json)
read -r sub_id status < <("$PY" -c 'import json, sys; r = json.load(sys.stdin); print(r["id"], r["status"])' <<<"$result")
if [[ $status != Accepted ]]; then
  echo "error: notarisation $sub_id ended $status; Apple's log:" >&2
  xcrun notarytool log "$sub_id" "${notary_args[@]}" >&2 || true
  exit 1
fi
xcrun stapler staple "$DMG"
xcrun stapler validate "$DMG"
spctl --assess --type open --context context:primary-signature --verbose "$DMG"
echo "built signed, notarised and stapled $DMG ($(du -h "$DMG" | cut -f1))"
