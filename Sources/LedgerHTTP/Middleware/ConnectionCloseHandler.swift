import Logging
import NIOCore
import NIOHTTP1

/// Ends a connection once a response that says `Connection: close` is written, however much of
/// the request's body is still coming.
///
/// An error answer to a request whose body was not read says `Connection: close` (`ErrorMiddleware`):
/// otherwise the server would read that body to its end, however large and slow, to reach the
/// next request. Here the output is shut as soon as the response is out (the client
/// sees its end), whatever else arrives is dropped unread, and the connection is closed after
/// `linger`: closing at once, with request bytes unread, would send a reset that can destroy the
/// answer before the client reads it.
///
/// It works on NIO's HTTP/1 parts, between the request decoder and Hummingbird's codec, where
/// `Installer` places it.
final class ConnectionCloseHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    let linger: TimeAmount
    /// The response being written asked for the connection to end.
    private var closeAfterResponse = false
    /// The output is shut: nothing more is read for a request.
    private var ending = false

    init(linger: TimeAmount = .seconds(2)) {
        self.linger = linger
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !ending else { return }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(let head):
            closeAfterResponse = head.headers[canonicalForm: "connection"].contains { $0.lowercased() == "close" }
        case .end where closeAfterResponse:
            ending = true
            let written = promise ?? context.eventLoop.makePromise()
            context.writeAndFlush(data, promise: written)
            let linger = self.linger
            written.futureResult.assumeIsolated().whenComplete { _ in
                let shut = context.eventLoop.makePromise(of: Void.self)
                context.close(mode: .output, promise: shut)
                // A channel that cannot half-close is closed at once.
                shut.futureResult.assumeIsolated().whenFailure { _ in context.close(promise: nil) }
                context.eventLoop.assumeIsolated().scheduleTask(in: linger) { context.close(promise: nil) }
            }
            return
        case .body, .end:
            break
        }
        context.write(data, promise: promise)
    }

    /// Hummingbird adds its extra handlers after its own codec, where HTTP/1 parts are already
    /// HTTPTypes parts; this one moves a `ConnectionCloseHandler` in front of that codec.
    final class Installer: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = NIOAny

        func handlerAdded(context: ChannelHandlerContext) {
            let operations = context.pipeline.syncOperations
            do {
                let decoder = try operations.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self)
                try operations.addHandler(ConnectionCloseHandler(), position: .after(decoder))
            } catch {
                // Without it, refused bodies are read to their end: slower to shed, still correct.
                Logger(label: "purchase-ledger").debug("connection-close handler not installed", metadata: ["ledger.error": "\(error)"])
            }
        }
    }
}
