import GatewayCore
import Testing

@Suite struct RedactionTests {
    @Test(arguments: [
        ("cannot connect to mqtt://gw1:hunter22@broker:1883", "cannot connect to mqtt://gw1:***@broker:1883"),
        ("got \"https://u:p%40ss@example.org/t?x=1\"", "got \"https://u:***@example.org/t?x=1\""),
        ("two: nats://a:one1@h1:4222, nats://b:two2@h2", "two: nats://a:***@h1:4222, nats://b:***@h2"),
        // No password, or no credentials at all: unchanged.
        ("mqtt://gw1@broker:1883 and http://host:8080/a@b", "mqtt://gw1@broker:1883 and http://host:8080/a@b"),
        ("plain text: no url", "plain text: no url"),
    ])
    func urlPasswordsAreMaskedWhereverTheyAppear(_ text: String, _ expected: String) {
        #expect(Redaction.redact(text) == expected)
    }

    @Test func registeredSecretsAreMaskedAndShortOnesIgnored() {
        Redaction.register("tok-RedactionTests-1")
        Redaction.register("ab")
        #expect(Redaction.redact("Bearer tok-RedactionTests-1 rejected (ab)") == "Bearer *** rejected (ab)")
        Redaction.registerCredentials(inURL: "mqtts://u:pw-RedactionTests-2@h")
        // The password alone, as a library might echo it.
        #expect(Redaction.redact("auth failed for pw-RedactionTests-2") == "auth failed for ***")
    }

    @Test func secretOptionsAndSecretSubstitutionsAreRegistered() throws {
        let json = #"{"password": "pw-RedactionTests-3", "note": "${secret:RT_NOTE}", "plain": "${RT_PLAIN}"}"#
        guard case .object(let object) = try JSONValue.parse(string: json) else { Issue.record("not an object"); return }
        var reader = OptionReader(object: object, path: "x", diagnostics: ConfigurationDiagnostics(),
                                  environment: ["RT_NOTE": "note-RedactionTests-4", "RT_PLAIN": "plain-RedactionTests-5"])
        #expect(reader.secretString("password") == "pw-RedactionTests-3")
        #expect(reader.string("note") == "note-RedactionTests-4")
        #expect(reader.string("plain") == "plain-RedactionTests-5")
        #expect(Redaction.redact("pw-RedactionTests-3 note-RedactionTests-4 plain-RedactionTests-5") == "*** *** plain-RedactionTests-5")
    }
}
