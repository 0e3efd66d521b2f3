/// A page of an app's change feed: the changes after a position, in log order, each as the JSON
/// the ledger stored (`ChangeRecord`), and where the next page starts.
public struct ChangePage: Sendable {
    public struct Change: Sendable {
        public let position: Int64
        public let seq: Int
        /// The change's JSON, sent as it is.
        public let body: String

        public init(position: Int64, seq: Int, body: String) {
            self.position = position
            self.seq = seq
            self.body = body
        }
    }

    public let changes: [Change]
    /// Where to ask after next: the last change's position (a page never ends inside one), or,
    /// when the page holds every change written so far, the position the feed has been written
    /// through (positions between hold none of the app's changes). Never behind the cursor asked
    /// after, but for a cursor inside a position it is that position.
    public let position: Int64
    /// Whether more changes were written after this page already.
    public let more: Bool

    public init(changes: [Change], position: Int64, more: Bool) {
        self.changes = changes
        self.position = position
        self.more = more
    }
}
